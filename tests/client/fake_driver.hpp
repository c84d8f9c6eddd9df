// A Driver with a virtual clock and an in-memory network, for what a real broker cannot show
// deterministically: dials that fail, connections that die, time that passes. Each dialled
// port behaves as the test says: refuse, swallow the dial until its timeout, or run a
// FakeBroker that answers the handshake and the common methods the way RabbitMQ does.
// Nothing runs by itself: run() drains posted work, advance() moves the clock and fires
// timers in deadline order.
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "warren/client/driver.hpp"
#include "warren/wire/wire.hpp"

namespace warren::test {

using namespace std::chrono_literals;

// RabbitMQ's side of one connection: handshake, channels, confirm mode, declare, publish
// (acked at once unless held), consume, close.
class FakeBroker {
 public:
  struct Config {
    bool refuse_login = false;   // answer start-ok with connection.close 403
    bool hold_confirms = false;  // take publishes but never ack them
  };
  explicit FakeBroker(Config config) : config_(config) {}

  // The client's bytes in, the broker's bytes out.
  std::vector<std::byte> handle(std::span<const std::byte> bytes) {
    out_ = {};
    input_.assign(bytes.begin(), bytes.end());
    decoder_.feed(input_);
    for (;;) {
      auto f = decoder_.next();
      if (!f.ok() || !f->has_value()) break;
      on_frame(**f);
    }
    return out_.to_vector();
  }

  std::uint64_t published = 0;  // bodies received
  std::vector<std::string> methods;  // every method the client sent, by name
  std::function<void(std::vector<std::byte>)> push;  // set by the stream: bytes to the client

  // A delivery to the last consumer, sent now.
  void deliver(std::string_view body, const wire::BasicProperties& properties = {}) {
    wire::OutputQueue q;
    (void)wire::write_content(q, consume_channel_, wire::BasicDeliver{tag_, ++delivery_tag_, false, "", queue_name_},
                              properties, std::as_bytes(std::span{body.data(), body.size()}), 131072);
    push(q.to_vector());
  }
  // The broker cancels the last consumer (its queue was deleted, its node went down).
  void cancel_consumer() {
    wire::OutputQueue q;
    (void)wire::write_method_frame(q, consume_channel_, wire::Method{wire::BasicCancel{tag_, true}}, 0);
    push(q.to_vector());
  }
  // The correlation id of the last request published with a reply_to.
  std::string last_correlation_id;

 private:
  template <class M>
  void send(std::uint16_t channel, const M& m) {
    (void)wire::write_method_frame(out_, channel, wire::Method{m}, 0);
  }

  void on_frame(const wire::FrameView& f) {
    if (f.type == wire::FrameType::protocol_header) {
      wire::FieldTable props;
      props.set("product", std::string("fake"));
      send(0, wire::ConnectionStart{0, 9, props, "PLAIN AMQPLAIN", "en_US"});
      return;
    }
    if (f.type == wire::FrameType::header) {
      auto h = wire::decode_content_header(f.payload);
      body_left_ = h.ok() ? h->body_size : 0;
      if (h.ok() && h->properties.correlation_id) last_correlation_id = std::string(*h->properties.correlation_id);
      if (body_left_ == 0) published_one(f.channel);
      return;
    }
    if (f.type == wire::FrameType::body) {
      body_left_ -= std::min<std::uint64_t>(body_left_, f.payload.size());
      if (body_left_ == 0) published_one(f.channel);
      return;
    }
    if (f.type != wire::FrameType::method) return;
    auto m = wire::decode_method(f.payload);
    if (!m.ok()) return;
    methods.emplace_back(std::visit([](const auto& x) { return std::string(x.name); }, *m));
    const auto ch = f.channel;
    if (std::holds_alternative<wire::ConnectionStartOk>(*m)) {
      if (config_.refuse_login)
        send(0, wire::ConnectionClose{403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN", 0, 0});
      else
        send(0, wire::ConnectionTune{2047, 131072, 0});
    } else if (std::holds_alternative<wire::ConnectionOpen>(*m)) {
      send(0, wire::ConnectionOpenOk{});
    } else if (std::holds_alternative<wire::ConnectionClose>(*m)) {
      send(0, wire::ConnectionCloseOk{});
    } else if (std::holds_alternative<wire::ChannelOpen>(*m)) {
      send(ch, wire::ChannelOpenOk{});
    } else if (std::holds_alternative<wire::ChannelClose>(*m)) {
      confirm_seq_.erase(ch);
      send(ch, wire::ChannelCloseOk{});
    } else if (std::holds_alternative<wire::ConfirmSelect>(*m)) {
      confirm_seq_[ch] = 0;
      send(ch, wire::ConfirmSelectOk{});
    } else if (const auto* q = std::get_if<wire::QueueDeclare>(&*m)) {
      queue_name_ = q->queue.empty() ? "amq.gen-fake" : std::string(q->queue);
      send(ch, wire::QueueDeclareOk{queue_name_, 0, 0});
    } else if (std::holds_alternative<wire::BasicQos>(*m)) {
      send(ch, wire::BasicQosOk{});
    } else if (const auto* c = std::get_if<wire::BasicConsume>(&*m)) {
      tag_ = c->consumer_tag.empty() ? "amq.ctag-fake-" + std::to_string(++consumers_) : std::string(c->consumer_tag);
      consume_channel_ = ch;
      if (!c->no_wait) send(ch, wire::BasicConsumeOk{tag_});
    }
  }

  void published_one(std::uint16_t channel) {
    ++published;
    if (auto it = confirm_seq_.find(channel); it != confirm_seq_.end()) {
      ++it->second;
      if (!config_.hold_confirms) send(channel, wire::BasicAck{it->second, false});
    }
  }

  Config config_;
  wire::FrameDecoder decoder_{wire::FrameDecoder::Peer::client, 0};
  std::vector<std::byte> input_;
  wire::OutputQueue out_;
  std::uint64_t body_left_ = 0;
  std::map<std::uint16_t, std::uint64_t> confirm_seq_;  // channels in confirm mode: last seq
  std::string queue_name_, tag_;
  int consumers_ = 0;
  std::uint16_t consume_channel_ = 0;
  std::uint64_t delivery_tag_ = 0;
};

class FakeDriver final : public client::Driver {
 public:
  // silent: takes the TCP connection and never says a word (a stuck or foreign server).
  enum class Host { refuse, black_hole, broker, refuse_login, broker_holding_confirms, silent };

  std::map<std::uint16_t, Host> hosts;  // by port; a port not listed refuses
  int dials = 0;

  engine::Instant now() override { return now_; }

  std::unique_ptr<client::Stream> dial(const client::Endpoint& endpoint, engine::Duration timeout,
                                       std::optional<tls::TlsOptions>, client::StreamEvents& events) override {
    ++dials;
    auto it = hosts.find(endpoint.port);
    const Host host = it == hosts.end() ? Host::refuse : it->second;
    auto stream = std::make_unique<FakeStream>(*this, events, endpoint);
    auto alive = stream->alive;
    FakeStream* s = stream.get();
    switch (host) {
      case Host::refuse:
        post([alive, s, endpoint] {
          if (*alive) s->fail(make_error(errc::connection_lost, "connect " + endpoint.host + ":" + std::to_string(endpoint.port) + ": connection refused"));
        });
        break;
      case Host::black_hole:
        s->dial_timer = timer([alive, s, endpoint, timeout] {
          if (*alive)
            s->fail(make_error(errc::timeout, "connect " + endpoint.host + ":" + std::to_string(endpoint.port) + ": no connection within " +
                                                  std::to_string(timeout.count()) + " ms"));
        });
        s->dial_timer->arm(now_ + timeout);
        break;
      case Host::silent:
        live_.push_back(s);
        post([alive, s] {
          if (*alive) s->events->on_connected();
        });
        break;
      case Host::broker:
      case Host::refuse_login:
      case Host::broker_holding_confirms:
        s->broker = std::make_unique<FakeBroker>(
            FakeBroker::Config{host == Host::refuse_login, host == Host::broker_holding_confirms});
        s->broker->push = [this, alive, s](std::vector<std::byte> bytes) {
          post([alive, s, bytes = std::move(bytes)] {
            if (*alive) s->events->on_bytes(bytes);
          });
        };
        live_.push_back(s);
        post([alive, s] {
          if (*alive) s->events->on_connected();
        });
        break;
    }
    return stream;
  }

  std::unique_ptr<client::Timer> timer(std::function<void()> on_fire) override {
    return std::make_unique<FakeTimer>(*this, std::move(on_fire));
  }
  void post(std::function<void()> fn) override { posted_.push_back(std::move(fn)); }

  // Runs posted work until there is none.
  void run() {
    while (!posted_.empty()) {
      auto fn = std::move(posted_.front());
      posted_.pop_front();
      fn();
    }
  }
  // Moves the clock by `d`, firing each timer that falls due, in deadline order.
  void advance(engine::Duration d) {
    const auto until = now_ + d;
    for (;;) {
      run();
      FakeTimer* next = nullptr;
      for (auto* t : timers_)
        if (t->deadline && *t->deadline <= until && (!next || *t->deadline < *next->deadline)) next = t;
      if (!next) break;
      now_ = *next->deadline;
      next->deadline.reset();
      next->on_fire();
    }
    now_ = until;
    run();
  }

  // Streams to a FakeBroker that are still open.
  [[nodiscard]] std::size_t open_connections() const { return live_.size(); }
  // The broker side of the newest open connection.
  [[nodiscard]] FakeBroker& last_broker() {
    if (live_.empty()) throw std::runtime_error("no open connection to a fake broker");
    return *live_.back()->broker;
  }
  // Kills every open broker connection, as a broker restart does.
  void reset_all() {
    auto live = live_;
    for (auto* s : live) s->fail(make_error(errc::connection_lost, "connection reset by peer"));
    run();
  }

 private:
  struct FakeTimer final : client::Timer {
    FakeTimer(FakeDriver& d, std::function<void()> fn) : driver(d), on_fire(std::move(fn)) { driver.timers_.push_back(this); }
    ~FakeTimer() override { std::erase(driver.timers_, this); }
    void arm(engine::Instant at) override { deadline = at; }
    void cancel() override { deadline.reset(); }
    FakeDriver& driver;
    std::function<void()> on_fire;
    std::optional<engine::Instant> deadline;
  };

  struct FakeStream final : client::Stream {
    FakeStream(FakeDriver& d, client::StreamEvents& e, client::Endpoint ep) : driver(d), events(&e), endpoint(std::move(ep)) {}
    ~FakeStream() override { close(); }

    void write(std::span<const std::span<const std::byte>> parts) override {
      std::vector<std::byte> bytes;
      for (auto p : parts) bytes.insert(bytes.end(), p.begin(), p.end());
      auto reply = broker ? broker->handle(bytes) : std::vector<std::byte>{};
      const std::size_t n = bytes.size();
      driver.post([alive = alive, this, n, reply = std::move(reply)] {
        if (!*alive) return;
        events->on_written(n);
        if (!*alive || reply.empty()) return;
        if (reading) events->on_bytes(reply);
        else held.insert(held.end(), reply.begin(), reply.end());
      });
    }
    void set_reading(bool r) override {
      reading = r;
      if (r && !held.empty())
        driver.post([alive = alive, this] {
          if (!*alive || held.empty()) return;
          auto bytes = std::move(held);
          held.clear();
          events->on_bytes(bytes);
        });
    }
    void close() override {
      if (!*alive) return;
      *alive = false;
      std::erase(driver.live_, this);
    }
    void fail(Error cause) {
      if (!*alive) return;
      auto* e = events;
      close();
      e->on_stream_error(std::move(cause));
    }

    FakeDriver& driver;
    client::StreamEvents* events;
    client::Endpoint endpoint;
    std::shared_ptr<bool> alive = std::make_shared<bool>(true);
    std::unique_ptr<FakeBroker> broker;
    std::unique_ptr<client::Timer> dial_timer;
    bool reading = true;
    std::vector<std::byte> held;
  };

  engine::Instant now_ = engine::Instant{} + 1000s;
  std::deque<std::function<void()>> posted_;
  std::vector<FakeTimer*> timers_;
  std::vector<FakeStream*> live_;
};

}  // namespace warren::test
