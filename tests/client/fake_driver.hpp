// A Driver with a virtual clock and an in-memory network, for what a real broker cannot show
// deterministically: dials that fail, connections that die, time that passes. Each dialled
// port behaves as the test says: refuse, swallow the dial until its timeout, or run a
// FakeBroker that answers the handshake and the common methods the way RabbitMQ does.
// Nothing runs by itself: run() drains posted work, advance() moves the clock and fires
// timers in deadline order.
//
// For the simulation (tests/sim/): a broker given a BrokerWorld is a model of RabbitMQ (queues
// that outlive connections, routing on the default exchange, consumers, basic.get, delivery
// acks, confirms, heartbeats) with faults a test scripts: close a channel or the connection,
// block, go silent, cancel a consumer, hold or nack confirms. Every broker, model or not,
// logs the settles (ack, nack, reject) it read with their delivery tags; the model also
// notes a reject or nack of a stream subscription's delivery (x-stream-offset). A stream can be cut, stalled, or
// hold what it reads. Without a world the broker behaves as it always did.
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/model_exchanges.hpp"
#include "client/model_queues.hpp"
#include "warren/client/driver.hpp"
#include "warren/wire/wire.hpp"

namespace warren::test {

using namespace std::chrono_literals;

class FakeBroker;

// What outlives one connection, as on a real broker: the queues and their messages; and what
// a test checks the client against: every publish the broker received, and what it confirmed.
struct BrokerWorld {
  struct Message {
    std::string body, correlation_id, reply_to;
    bool redelivered = false;
    int deliveries = 0;
    std::vector<std::byte> headers;  // a field table's bytes as sent (may be one the client cannot decode)
    // What the layers read (tests/sim/layers): the headers decoded (used instead of the bytes
    // when set), the other properties, the key it was routed with, a quorum queue's count of
    // returns, and a TTL queue's expiry.
    std::optional<wire::FieldTable> table;
    std::string message_id, user_id, type;
    std::optional<std::uint8_t> delivery_mode;
    std::string routing_key;
    int delivery_count = 0;
    std::optional<engine::Instant> expires_at;
  };
  // A stream: entries at offsets first, first + 1, ...; retention drops from the front.
  struct Stream {
    std::uint64_t first = 0;
    std::deque<Message> entries;
    [[nodiscard]] std::uint64_t end() const { return first + entries.size(); }
  };
  // A message handed out this often is put aside (in `bounced`): a client that rejects
  // everything it is given would otherwise keep the simulated loop busy forever.
  int max_deliveries = 20;
  std::vector<std::string> bounced;
  // Deliveries of a stream subscription (x-stream-offset) the client rejected or nacked:
  // RabbitMQ 3.10-3.12 closes the connection (540) for that, so it must never happen.
  std::vector<std::string> stream_rejected;
  std::map<std::string, int> delivered;  // deliveries sent, by consumer tag
  std::map<std::string, std::deque<Message>> queues;
  std::map<std::string, int> received;  // by publish key (the body up to its first ':')
  std::set<std::string> acked, nacked;  // publish keys the broker confirmed or nacked
  std::vector<FakeBroker*> brokers;     // every connection's broker side, for deliveries
  ModelExchanges exchanges;             // declared exchanges and their bindings
  std::map<std::string, int> returned;  // basic.return sent, by publish key
  // Connections the broker dropped because the client sent nothing for two heartbeat
  // intervals (RabbitMQ drops the TCP connection): a client owes its heartbeats.
  std::vector<std::string> heartbeat_missed;
  // Channel errors only the client library can cause (the application never names
  // amq.rabbitmq.reply-to itself in the simulation): the broker's reply text.
  std::vector<std::string> library_faults;
  int next_broker_id = 0;
  // ---- the layers' model (see model_queues.hpp): queue kinds by declared arguments, streams,
  // TTL on the driver's clock (set `clock`), dead-lettering, and user_id checked against the
  // one user every connection logs in as.
  std::map<std::string, ModelQueueInfo> queue_info;
  std::map<std::string, Stream> streams;
  std::function<engine::Instant()> clock;
  std::string user = "guest";
  std::vector<std::string> user_id_refused;  // the 406s' texts
  std::vector<std::string> dead_lettered;    // "<queue> <reason> <message_id>", in order
  std::vector<std::string> unknown_tags;     // settles of a delivery tag the channel does not hold (406)
  // What RabbitMQ 4.3 refuses by default (docs/compatibility.md), as the model broker saw it
  // asked: a queue neither durable nor exclusive, global QoS, x-queue-mode,
  // x-queue-master-locator. 3.10 takes them; warren must never ask for one by default.
  std::vector<std::string> denied_in_4_3;
  // Classic queues whose node is down, with the messages they hold when it is back: a declare
  // of one is refused (404, "home node ... is down or inaccessible", as RabbitMQ says), nothing
  // is routed into it and nothing in it expires.
  std::map<std::string, std::deque<Message>> down;
  // Streams that take appends (and confirm them) but deliver nothing to their consumers for a
  // while: a leader or a replica hung, or a cluster electing a leader. dispatch() when unset.
  bool streams_paused = false;
  // Streams whose member on the node a client is connected to is not running (a node restarted,
  // a leader being elected): RabbitMQ 3.10 refuses a consumer there with a channel error (406,
  // "does not have a replica on the local node"); appends still land through the leader.
  bool streams_without_local_replica = false;
  void take_down(const std::string& name) {
    if (auto it = queues.find(name); it != queues.end()) {
      down[name] = std::move(it->second);
      queues.erase(it);
    }
  }
  void bring_up_all() {
    for (auto& [name, q] : down) queues[name] = std::move(q);
    down.clear();
  }
  void dispatch();                      // hands queued messages to consumers, anywhere
  // A routed message into queue `name`: a stream appends it, a TTL queue stamps its expiry.
  void enqueue(const std::string& name, Message m);
  // An unacked message back to the head of its queue, marked redelivered; a quorum queue
  // counts the return.
  void return_to(const std::string& queue, Message m) {
    m.redelivered = true;
    if (is(queue, "quorum")) ++m.delivery_count;
    queues[queue].push_front(std::move(m));
  }
  // Where queue `from` sends a message it expired or that was rejected without requeue
  // (nowhere without x-dead-letter-exchange).
  void dead_letter(const std::string& from, Message m, const std::string& reason);
  [[nodiscard]] std::optional<engine::Instant> next_expiry() const;
  void expire(engine::Instant now);  // every queue's head past its TTL, dead-lettered
  [[nodiscard]] bool is(const std::string& queue, std::string_view type) const {
    auto it = queue_info.find(queue);
    return it != queue_info.end() && it->second.type == type;
  }
  // Retention: up to `n` of the stream's oldest entries go, none a live consumer has still to
  // read (a reader keeps its segment open) and never the newest (RabbitMQ keeps the segment
  // being written); how many went.
  std::size_t truncate(const std::string& stream, std::size_t n);
  static std::string key_of(std::string_view body) { return std::string(body.substr(0, body.find(':'))); }
};

inline bool route_reply(BrokerWorld& world, std::string_view routing_key, BrokerWorld::Message m);

// RabbitMQ's side of one connection: handshake, channels, confirm mode, declare, publish
// (acked at once unless held), consume, close.
class FakeBroker {
 public:
  struct Config {
    bool refuse_login = false;   // answer start-ok with connection.close 403
    bool hold_confirms = false;  // take publishes but never ack them
    BrokerWorld* world = nullptr;  // set: the model broker (see the file's first comment)
    std::uint16_t heartbeat_s = 0;  // proposed in connection.tune; the model broker sends them
    std::string version;  // set: server-properties "version" in connection.start
    // The auth backend (not the model broker): set, it judges the secret of every login (PLAIN)
    // and every connection.update-secret; false refuses the login (403) or the new secret
    // (530, closing the connection), as RabbitMQ does with an expired token.
    std::function<bool(std::string_view secret)> accepts{};
    // Told each secret the broker was handed: what ("login" or "update") and the secret.
    std::function<void(std::string_view what, std::string_view secret)> on_secret{};
  };
  explicit FakeBroker(Config config) : config_(config) {
    if (config_.world) {
      config_.world->brokers.push_back(this);
      id_ = ++config_.world->next_broker_id;
    }
  }
  ~FakeBroker() { disconnect(); }
  FakeBroker(const FakeBroker&) = delete;
  FakeBroker& operator=(const FakeBroker&) = delete;

  // The client's bytes in, the broker's bytes out.
  std::vector<std::byte> handle(std::span<const std::byte> bytes) {
    out_ = {};
    if (silent_ || gone_) return {};
    handling_ = true;
    input_.assign(bytes.begin(), bytes.end());
    decoder_.feed(input_);
    for (;;) {
      auto f = decoder_.next();
      if (!f.ok() || !f->has_value()) break;
      if (config_.world) model_frame(**f);
      else on_frame(**f);
    }
    handling_ = false;
    auto bytes_out = out_.to_vector();
    out_ = {};
    return bytes_out;
  }

  std::uint64_t published = 0;  // bodies received
  std::vector<std::string> methods;  // every method the client sent, by name
  // Every basic.ack, basic.nack and basic.reject the client sent, with its delivery tag.
  struct Settle {
    std::string method;
    std::uint16_t channel = 0;
    std::uint64_t delivery_tag = 0;
    bool requeue = false;
    bool multiple = false;  // the multiple bit of an ack or nack
    friend bool operator==(const Settle&, const Settle&) = default;
  };
  std::vector<Settle> settles;
  std::function<void(std::vector<std::byte>)> push;  // set by the stream: bytes to the client

  // A delivery to the last consumer, sent now.
  void deliver(std::string_view body, const wire::BasicProperties& properties = {}) {
    wire::OutputQueue q;
    (void)wire::write_content(q, consume_channel_, wire::BasicDeliver{tag_, ++delivery_tag_, false, "", queue_name_},
                              properties, std::as_bytes(std::span{body.data(), body.size()}), 131072);
    push(q.to_vector());
  }
  // A delivery to consumer `tag` on `channel` (any consumer the client made), sent now.
  void deliver_on(std::uint16_t channel, const std::string& tag, std::string_view body) {
    wire::OutputQueue q;
    (void)wire::write_content(q, channel, wire::BasicDeliver{tag, ++delivery_tag_, false, "", queue_name_}, {},
                              std::as_bytes(std::span{body.data(), body.size()}), 131072);
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

  // ---- the model broker (Config::world set): faults a test scripts, and what it can see.
  // The broker closes channel `channel` (404 NOT_FOUND, 406 PRECONDITION_FAILED, ...): it
  // discards the channel's methods until channel.close-ok, as RabbitMQ does.
  void close_channel(std::uint16_t channel, std::uint16_t code, std::string text) {
    auto it = channels_.find(channel);
    if (it == channels_.end() || it->second.closing || closing_) return;
    begin_channel_close(channel, code, std::move(text), 0, 0);
    flush_async();
  }
  // connection.close from the broker (320 CONNECTION_FORCED: the node is shutting down).
  void close_connection(std::uint16_t code, std::string text) {
    if (closing_ || !open_) return;
    begin_connection_close(code, std::move(text));
    flush_async();
  }
  // connection.blocked: from the next publish on the broker reads nothing until unblocked.
  void set_blocked(bool blocked) {
    if (!open_ || closing_ || blocked == blocked_) return;
    blocked_ = blocked;
    if (blocked) {
      send(0, wire::ConnectionBlocked{"low on memory"});
    } else {
      send(0, wire::ConnectionUnblocked{});
      paused_ = false;
      auto backlog = std::move(backlog_);
      backlog_.clear();
      for (auto& f : backlog) model_frame(wire::FrameView{f.type, f.channel, f.payload});
    }
    flush_async();
  }
  // The broker stops reading and stops sending, heartbeats included (a hung node).
  void go_silent() { silent_ = true; }
  // basic.cancel from the broker (its queue was deleted, its node went down).
  void cancel_consumer_tag(const std::string& tag) {
    auto it = consumers_by_tag_.find(tag);
    if (it == consumers_by_tag_.end() || closing_) return;
    const auto ch = it->second.channel;
    if (it->second.queue == direct_reply_to) channels_[ch].reply_consumer_cancelled = true;
    consumers_by_tag_.erase(it);
    send(ch, wire::BasicCancel{tag, true});
    flush_async();
  }
  // Releases the held confirms as one multiple ack per channel, as RabbitMQ acks when busy.
  void release_confirms_as_multiple() {
    config_.hold_confirms = false;
    std::map<std::uint16_t, std::uint64_t> highest;
    auto held = std::move(held_confirms_);
    held_confirms_.clear();
    for (auto [ch, seq] : held) {
      confirm(ch, seq, false);
      highest[ch] = std::max(highest[ch], seq);
    }
    for (auto [ch, seq] : highest) send(ch, wire::BasicAck{seq, true});
    flush_async();
  }
  // Releases the `n` oldest held confirms, one basic.ack each; the rest stay held.
  void release_confirms(std::size_t n) {
    n = std::min(n, held_confirms_.size());
    std::vector<std::pair<std::uint16_t, std::uint64_t>> now(held_confirms_.begin(),
                                                              held_confirms_.begin() + static_cast<std::ptrdiff_t>(n));
    held_confirms_.erase(held_confirms_.begin(), held_confirms_.begin() + static_cast<std::ptrdiff_t>(n));
    for (auto [ch, seq] : now) confirm(ch, seq);
    flush_async();
  }
  void hold_confirms(bool hold) {
    config_.hold_confirms = hold;
    if (!hold) release_confirms(held_confirms_.size());
  }
  void nack_next_publish(bool on = true) { nack_next_ = on; }
  // A heartbeat frame, as the broker sends on the negotiated interval.
  void send_heartbeat() {
    if (silent_ || gone_) return;
    wire::write_heartbeat(out_);
    flush_async();
  }
  // The stream is gone: unacked messages go back to their queues, consumers end.
  void disconnect() {
    if (gone_) return;
    gone_ = true;
    for (auto& [id, ch] : channels_) requeue(ch);
    channels_.clear();
    consumers_by_tag_.clear();
    if (config_.world) {
      std::erase(config_.world->brokers, this);
      // Its exclusive queues go with it.
      for (auto it = config_.world->queue_info.begin(); it != config_.world->queue_info.end();) {
        if (it->second.exclusive_owner == id_) {
          config_.world->queues.erase(it->first);
          it = config_.world->queue_info.erase(it);
        } else {
          ++it;
        }
      }
      config_.world->dispatch();
    }
  }
  [[nodiscard]] bool is_silent() const { return silent_; }
  [[nodiscard]] BrokerWorld* world() const { return config_.world; }
  [[nodiscard]] std::uint16_t negotiated_heartbeat_s() const { return heartbeat_s_; }
  // Channels the broker has open (not closing), and consumer tags, in order.
  [[nodiscard]] std::vector<std::uint16_t> open_channels() const {
    std::vector<std::uint16_t> out;
    for (const auto& [id, ch] : channels_)
      if (!ch.closing) out.push_back(id);
    return out;
  }
  [[nodiscard]] std::vector<std::string> consumer_tags() const {
    std::vector<std::string> out;
    for (const auto& [tag, c] : consumers_by_tag_) out.push_back(tag);
    return out;
  }
  std::function<void(std::uint16_t heartbeat_s)> on_tuned;  // set by the driver
  // channel.flow from the broker (RabbitMQ itself never sends it; the protocol allows it):
  // the client must answer flow-ok.
  void send_flow(std::uint16_t channel, bool active) {
    auto it = channels_.find(channel);
    if (it == channels_.end() || it->second.closing || closing_ || gone_) return;
    ++it->second.flows_unanswered;
    send(channel, wire::ChannelFlow{active});
    flush_async();
  }
  // channel.flow the broker sent and the client has not answered, over open channels.
  [[nodiscard]] int unanswered_flows() const {
    int n = 0;
    for (const auto& [id, ch] : channels_)
      if (!ch.closing) n += ch.flows_unanswered;
    return n;
  }
  // Deliveries from `queue` this connection's channels hold unacked, by body.
  [[nodiscard]] std::vector<std::string> unacked_from(const std::string& queue) const;
  // Whether the broker still checks the client's heartbeats: not once it stopped reading
  // (blocked, silent) or the connection is closing.
  [[nodiscard]] bool checks_heartbeats() const { return open_ && !paused_ && !silent_ && !closing_ && !gone_; }

 private:
  template <class M>
  void send(std::uint16_t channel, const M& m) {
    (void)wire::write_method_frame(out_, channel, wire::Method{m}, 0);
  }

  void on_frame(const wire::FrameView& f) {
    if (f.type == wire::FrameType::protocol_header) {
      wire::FieldTable props;
      props.set("product", std::string("fake"));
      if (!config_.version.empty()) props.set("version", config_.version);
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
    record_settle(f.channel, *m);
    const auto ch = f.channel;
    if (const auto* start_ok = std::get_if<wire::ConnectionStartOk>(&*m)) {
      // PLAIN: "\0user\0secret".
      const std::string_view response = start_ok->response;
      const std::string_view secret = response.substr(std::min(response.size(), response.find('\0', 1) + 1));
      if (config_.on_secret) config_.on_secret("login", secret);
      if (config_.accepts && !config_.accepts(secret))
        send(0, wire::ConnectionClose{403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN", 0, 0});
      else if (config_.refuse_login)
        send(0, wire::ConnectionClose{403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN", 0, 0});
      else
        send(0, wire::ConnectionTune{2047, 131072, 0});
    } else if (const auto* open = std::get_if<wire::ConnectionOpen>(&*m)) {
      // The only vhost this broker has is "/"; any other gets RabbitMQ's answer.
      const std::string missing = "NOT_ALLOWED - vhost " + std::string(open->virtual_host) + " not found";
      if (open->virtual_host == "/") send(0, wire::ConnectionOpenOk{});
      else send(0, wire::ConnectionClose{.reply_code = 530, .reply_text = missing, .class_id = 10, .method_id = 40});
    } else if (std::holds_alternative<wire::ConnectionClose>(*m)) {
      send(0, wire::ConnectionCloseOk{});
    } else if (const auto* update = std::get_if<wire::ConnectionUpdateSecret>(&*m)) {
      if (config_.on_secret) config_.on_secret("update", update->new_secret);
      if (config_.accepts && !config_.accepts(update->new_secret))
        send(0, wire::ConnectionClose{530, "NOT_ALLOWED - New secret was refused by one of the backends", 10, 70});
      else
        send(0, wire::ConnectionUpdateSecretOk{});
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

  void record_settle(std::uint16_t channel, const wire::Method& m) {
    if (const auto* a = std::get_if<wire::BasicAck>(&m)) settles.push_back({"basic.ack", channel, a->delivery_tag, false, a->multiple});
    if (const auto* n = std::get_if<wire::BasicNack>(&m))
      settles.push_back({"basic.nack", channel, n->delivery_tag, n->requeue, n->multiple});
    if (const auto* r = std::get_if<wire::BasicReject>(&m)) settles.push_back({"basic.reject", channel, r->delivery_tag, r->requeue});
  }

  void published_one(std::uint16_t channel) {
    ++published;
    if (auto it = confirm_seq_.find(channel); it != confirm_seq_.end()) {
      ++it->second;
      if (!config_.hold_confirms) send(channel, wire::BasicAck{it->second, false});
    }
  }


  // ---- the model broker
  struct OwnedFrame {
    wire::FrameType type;
    std::uint16_t channel;
    std::vector<std::byte> bytes;
    std::span<const std::byte> payload;
  };
  struct Unacked {
    std::string queue;
    BrokerWorld::Message message;
    bool stream = false;  // delivered to a stream subscription
    std::string tag;      // the consumer it went to; empty for basic.get
    bool from_stream = false;  // an entry of a stream queue: never requeued, only acked
  };
  struct Incoming {  // a publish whose content is still arriving
    std::string exchange, routing_key, body;
    bool mandatory = false;
    std::string correlation_id, reply_to;
    std::uint64_t body_left = 0;
    bool have_header = false;
    BrokerWorld::Message meta;  // the content header's other properties
  };
  struct ModelChannel {
    bool closing = false;  // the broker sent channel.close and waits for close-ok
    bool confirm = false;
    std::uint16_t prefetch = 0;         // basic.qos, global=false: each later consumer's limit
    std::uint16_t global_prefetch = 0;  // basic.qos, global=true: the channel's consumers together
    int flows_unanswered = 0;
    bool reply_consumer_cancelled = false;  // the broker cancelled its amq.rabbitmq.reply-to consumer
    std::uint64_t seq = 0;
    std::uint64_t next_delivery_tag = 0;
    std::map<std::uint64_t, Unacked> unacked;
    std::optional<Incoming> incoming;
  };
  struct ModelConsumer {
    std::uint16_t channel = 0;
    std::string queue;
    bool no_ack = false;
    bool stream = false;  // subscribed with x-stream-offset
    std::uint16_t limit = 0;  // its prefetch (0: none)
    std::uint64_t cursor = 0;  // a stream queue's consumer: the next offset it gets
  };
  friend struct BrokerWorld;

  void flush_async() {
    if (handling_ || out_.empty()) return;
    auto bytes = out_.to_vector();
    out_ = {};
    if (!silent_ && !gone_ && push) push(std::move(bytes));
  }
  void requeue(ModelChannel& ch) {
    if (!config_.world) return;
    // Back to the head of their queues, in delivery order, marked redelivered.
    for (auto it = ch.unacked.rbegin(); it != ch.unacked.rend(); ++it) {
      if (it->second.from_stream) continue;
      config_.world->return_to(it->second.queue, it->second.message);
    }
    ch.unacked.clear();
  }
  void drop_consumers(std::uint16_t channel) {
    std::erase_if(consumers_by_tag_, [&](const auto& kv) { return kv.second.channel == channel; });
  }
  void begin_channel_close(std::uint16_t channel, std::uint16_t code, std::string text, std::uint16_t class_id,
                           std::uint16_t method_id) {
    auto& ch = channels_[channel];
    ch.closing = true;
    ch.incoming.reset();
    requeue(ch);
    drop_consumers(channel);
    send(channel, wire::ChannelClose{code, text, class_id, method_id});
    config_.world->dispatch();
  }
  void begin_connection_close(std::uint16_t code, std::string text) {
    closing_ = true;
    send(0, wire::ConnectionClose{code, text, 0, 0});
  }
  void confirm(std::uint16_t channel, std::uint64_t seq, bool send_ack = true) {
    auto it = channels_.find(channel);
    if (it == channels_.end() || it->second.closing) return;
    auto k = seq_keys_.find({channel, seq});
    if (k != seq_keys_.end()) {
      config_.world->acked.insert(k->second);
      seq_keys_.erase(k);
    }
    if (send_ack) send(channel, wire::BasicAck{seq, false});
  }
  // A stored message's properties as the broker hands them out, with what it adds on the way:
  // a quorum queue's count, a stream's offset. `added` holds the headers they point at.
  static wire::BasicProperties stored_properties(const BrokerWorld::Message& m, std::optional<wire::FieldTable>& added,
                                                 std::optional<std::uint64_t> stream_offset) {
    wire::BasicProperties p;
    if (!m.correlation_id.empty()) p.correlation_id = m.correlation_id;
    if (!m.reply_to.empty()) p.reply_to = m.reply_to;
    if (!m.message_id.empty()) p.message_id = m.message_id;
    if (!m.user_id.empty()) p.user_id = m.user_id;
    if (!m.type.empty()) p.type = m.type;
    p.delivery_mode = m.delivery_mode;
    added = m.table;
    if (m.delivery_count > 0 || stream_offset) {
      if (!added && m.headers.empty()) added.emplace();
      if (added && m.delivery_count > 0) added->set("x-delivery-count", static_cast<std::int64_t>(m.delivery_count));
      if (added && stream_offset) added->set("x-stream-offset", static_cast<std::int64_t>(*stream_offset));
    }
    if (added) p.headers = wire::TableRef(*added);
    else if (!m.headers.empty()) p.headers = wire::TableRef::validated(m.headers);
    return p;
  }
  void deliver_to(const std::string& tag, ModelConsumer& c, BrokerWorld::Message m,
                  std::optional<std::uint64_t> stream_offset = std::nullopt) {
    auto& ch = channels_[c.channel];
    const std::uint64_t dtag = ++ch.next_delivery_tag;
    ++config_.world->delivered[tag];
    std::optional<wire::FieldTable> added;
    const wire::BasicProperties p = stored_properties(m, added, stream_offset);
    const std::string routing_key = m.routing_key;
    (void)wire::write_content(out_, c.channel, wire::BasicDeliver{tag, dtag, m.redelivered, "", routing_key.empty() ? c.queue : routing_key},
                              p, std::as_bytes(std::span{m.body.data(), m.body.size()}), frame_max_);
    if (!c.no_ack) ch.unacked.emplace(dtag, Unacked{c.queue, std::move(m), c.stream, tag, stream_offset.has_value()});
  }
  // Whether a consumer holds as many unacked deliveries as its prefetch (or its channel as
  // many as the channel's global one) allows.
  static bool full(const ModelChannel& ch, const std::string& tag, const ModelConsumer& c) {
    std::size_t mine = 0, all = 0;
    for (const auto& [dtag, u] : ch.unacked) {
      if (u.tag.empty()) continue;  // basic.get's do not count
      ++all;
      mine += u.tag == tag;
    }
    return (c.limit && mine >= c.limit) || (ch.global_prefetch && all >= ch.global_prefetch);
  }
  // One round of deliveries from the world's queues to this connection's consumers.
  bool dispatch_some() {
    if (gone_ || closing_ || silent_) return false;
    bool any = false;
    for (auto& [tag, c] : consumers_by_tag_) {
      auto chit = channels_.find(c.channel);
      if (chit == channels_.end() || chit->second.closing) continue;
      if (!c.no_ack && full(chit->second, tag, c)) continue;  // prefetch reached: RabbitMQ waits for acks
      if (auto s = config_.world->streams.find(c.queue); s != config_.world->streams.end()) {
        if (config_.world->streams_paused) continue;
        c.cursor = std::max(c.cursor, s->second.first);  // retention passed it: on from the oldest
        if (c.cursor >= s->second.end()) continue;
        const auto offset = c.cursor++;
        deliver_to(tag, c, s->second.entries[static_cast<std::size_t>(offset - s->second.first)], offset);
        any = true;
        continue;
      }
      auto q = config_.world->queues.find(c.queue);
      if (q == config_.world->queues.end() || q->second.empty()) continue;
      auto m = std::move(q->second.front());
      q->second.pop_front();
      if (++m.deliveries > config_.world->max_deliveries) {
        config_.world->bounced.push_back(BrokerWorld::key_of(m.body));
        continue;
      }
      deliver_to(tag, c, std::move(m));
      any = true;
    }
    flush_async();
    return any;
  }

  // A connection error (RabbitMQ's 504, 540, ...): everything after it is discarded.
  void connection_error(std::uint16_t code, std::string text) {
    begin_connection_close(code, std::move(text));
  }

  void model_frame(const wire::FrameView& f) {
    if (paused_) {  // blocked: RabbitMQ stops reading this connection
      OwnedFrame o{f.type, f.channel, std::vector<std::byte>(f.payload.begin(), f.payload.end()), {}};
      backlog_.push_back(std::move(o));
      backlog_.back().payload = backlog_.back().bytes;
      return;
    }
    if (f.type == wire::FrameType::protocol_header) {
      wire::FieldTable props;
      props.set("product", std::string("fake"));
      if (!config_.version.empty()) props.set("version", config_.version);
      send(0, wire::ConnectionStart{0, 9, props, "PLAIN AMQPLAIN", "en_US"});
      return;
    }
    if (f.type == wire::FrameType::heartbeat) return;
    const auto chn = f.channel;
    if (f.type == wire::FrameType::header || f.type == wire::FrameType::body) {
      if (closing_) return;
      auto it = channels_.find(chn);
      if (it == channels_.end()) return connection_error(504, "CHANNEL_ERROR - content on a channel not open");
      if (it->second.closing) return;
      auto& in = it->second.incoming;
      if (!in) return connection_error(505, "UNEXPECTED_FRAME - content with no basic.publish");
      if (f.type == wire::FrameType::header) {
        auto h = wire::decode_content_header(f.payload);
        if (!h.ok()) return connection_error(502, "SYNTAX_ERROR - content header");
        in->body_left = h->body_size;
        in->have_header = true;
        if (h->properties.correlation_id) in->correlation_id = std::string(*h->properties.correlation_id);
        if (h->properties.reply_to) in->reply_to = std::string(*h->properties.reply_to);
        if (h->properties.correlation_id) last_correlation_id = in->correlation_id;
        auto& meta = in->meta;
        const auto& pr = h->properties;
        if (pr.headers) {
          if (auto t = pr.headers->to_table(); t.ok()) meta.table = std::move(*t);
          else meta.headers.assign(pr.headers->encoded().begin(), pr.headers->encoded().end());
        }
        if (pr.message_id) meta.message_id = std::string(*pr.message_id);
        if (pr.user_id) meta.user_id = std::string(*pr.user_id);
        if (pr.type) meta.type = std::string(*pr.type);
        meta.delivery_mode = pr.delivery_mode;
      } else {
        in->body.append(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
        in->body_left -= std::min<std::uint64_t>(in->body_left, f.payload.size());
      }
      if (in->have_header && in->body_left == 0) {
        Incoming done = std::move(*in);
        in.reset();
        model_published(chn, std::move(done));
      }
      return;
    }
    if (f.type != wire::FrameType::method) return;
    auto decoded = wire::decode_method(f.payload);
    if (!decoded.ok()) return connection_error(502, "SYNTAX_ERROR");
    const wire::Method& m = *decoded;
    methods.emplace_back(std::visit([](const auto& x) { return std::string(x.name); }, m));
    record_settle(chn, m);
    if (chn == 0) return model_connection_method(m);
    if (closing_) return;  // after connection.close only close-ok counts
    if (const auto* open = std::get_if<wire::ChannelOpen>(&m)) {
      (void)open;
      if (channels_.contains(chn)) return connection_error(504, "CHANNEL_ERROR - second 'channel.open' seen");
      channels_[chn];
      send(chn, wire::ChannelOpenOk{});
      return;
    }
    auto it = channels_.find(chn);
    if (it == channels_.end()) return connection_error(504, "CHANNEL_ERROR - expected 'channel.open'");
    auto& ch = it->second;
    if (ch.closing) {
      if (std::holds_alternative<wire::ChannelCloseOk>(m)) channels_.erase(it);
      else if (std::holds_alternative<wire::ChannelClose>(m)) send(chn, wire::ChannelCloseOk{});
      return;  // RabbitMQ discards the rest until close-ok
    }
    if (std::holds_alternative<wire::ChannelClose>(m)) {
      requeue(ch);
      drop_consumers(chn);
      channels_.erase(it);
      send(chn, wire::ChannelCloseOk{});
      config_.world->dispatch();
      return;
    }
    if (ch.incoming) return connection_error(505, "UNEXPECTED_FRAME - a method inside a message's content");
    if (const auto* p = std::get_if<wire::BasicPublish>(&m)) {
      if (blocked_) {  // the first publish after connection.blocked stops the reader
        paused_ = true;
        OwnedFrame o{f.type, f.channel, std::vector<std::byte>(f.payload.begin(), f.payload.end()), {}};
        methods.pop_back();  // counted again when it is read
        backlog_.push_back(std::move(o));
        backlog_.back().payload = backlog_.back().bytes;
        return;
      }
      ch.incoming = Incoming{std::string(p->exchange), std::string(p->routing_key), {}, p->mandatory, {}, {}, 0, false, {}};
      return;
    }
    if (const auto* c = std::get_if<wire::ConfirmSelect>(&m)) {
      ch.confirm = true;
      if (!c->no_wait) send(chn, wire::ConfirmSelectOk{});
      return;
    }
    if (const auto* q = std::get_if<wire::QueueDeclare>(&m)) {
      std::string name = q->queue.empty() ? "amq.gen-" + std::to_string(++generated_) : std::string(q->queue);
      auto& world = *config_.world;
      const bool exists = world.queues.contains(name);
      if (auto info = world.queue_info.find(name);
          exists && info != world.queue_info.end() && info->second.exclusive_owner && info->second.exclusive_owner != id_)
        return begin_channel_close(chn, 405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '" + name + "' in vhost '/'", 50, 10);
      if (world.down.contains(name))
        return begin_channel_close(chn, 404, "NOT_FOUND - home node 'rabbit@fake' of durable queue '" + name + "' in vhost '/' is down or inaccessible", 50, 10);
      if (q->passive && !exists) return begin_channel_close(chn, 404, "NOT_FOUND - no queue '" + name + "' in vhost '/'", 50, 10);
      if (!q->passive) {
        if (!q->durable && !q->exclusive) world.denied_in_4_3.push_back("a transient non-exclusive queue: " + name);
        if (auto t = q->arguments.to_table(); t.ok())
          for (const auto& e : t->entries)
            if (e.key == "x-queue-mode" || e.key == "x-queue-master-locator")
              world.denied_in_4_3.push_back(e.key + " on queue " + name);
        auto arguments = q->arguments.to_table();
        auto asked = ModelQueueInfo::from(arguments.ok() ? *arguments : wire::FieldTable{});
        if (q->exclusive) asked.exclusive_owner = id_;
        if (auto info = world.queue_info.find(name); exists && info != world.queue_info.end()) {
          if (auto arg = info->second.inequivalent(asked))
            return begin_channel_close(chn, 406, "PRECONDITION_FAILED - inequivalent arg '" + *arg + "' for queue '" + name + "' in vhost '/'", 50, 10);
        } else if (!exists || asked.type != "classic" || asked.ttl_ms || asked.dlx) {
          world.queue_info[name] = asked;
          if (asked.type == "stream") world.streams[name];
        }
      }
      auto& queue = world.queues[name];
      queue_name_ = name;
      std::uint32_t consumers = 0;
      for (auto* b : config_.world->brokers)
        for (auto& [t, cc] : b->consumers_by_tag_) consumers += cc.queue == name;
      if (!q->no_wait) send(chn, wire::QueueDeclareOk{name, static_cast<std::uint32_t>(queue.size()), consumers});
      return;
    }
    if (const auto* qos = std::get_if<wire::BasicQos>(&m)) {
      if (qos->global) config_.world->denied_in_4_3.push_back("global basic.qos on channel " + std::to_string(chn));
      (qos->global ? ch.global_prefetch : ch.prefetch) = qos->prefetch_count;
      send(chn, wire::BasicQosOk{});
      config_.world->dispatch();  // a raised limit lets more through
      return;
    }
    if (const auto* x = std::get_if<wire::ExchangeDeclare>(&m)) {
      if (auto refused = config_.world->exchanges.declare(std::string(x->exchange), std::string(x->type), x->passive)) {
        if (refused->code >= 500) return connection_error(refused->code, refused->text);
        return begin_channel_close(chn, refused->code, refused->text, 40, 10);
      }
      if (!x->no_wait) send(chn, wire::ExchangeDeclareOk{});
      return;
    }
    if (const auto* x = std::get_if<wire::ExchangeDelete>(&m)) {
      config_.world->exchanges.remove(std::string(x->exchange));
      if (!x->no_wait) send(chn, wire::ExchangeDeleteOk{});
      return;
    }
    if (const auto* b = std::get_if<wire::QueueBind>(&m)) {
      const std::string queue(b->queue);
      if (!config_.world->queues.contains(queue))
        return begin_channel_close(chn, 404, "NOT_FOUND - no queue '" + queue + "' in vhost '/'", 50, 20);
      if (auto refused = config_.world->exchanges.bind(std::string(b->exchange), queue, std::string(b->routing_key)))
        return begin_channel_close(chn, refused->code, refused->text, 50, 20);
      if (!b->no_wait) send(chn, wire::QueueBindOk{});
      return;
    }
    if (const auto* u = std::get_if<wire::QueueUnbind>(&m)) {
      config_.world->exchanges.unbind(std::string(u->exchange), std::string(u->queue), std::string(u->routing_key));
      send(chn, wire::QueueUnbindOk{});
      return;
    }
    if (const auto* flow = std::get_if<wire::ChannelFlow>(&m)) {
      // RabbitMQ (rabbit_channel) answers active=true and refuses to pause a channel.
      if (!flow->active) return connection_error(540, "NOT_IMPLEMENTED - active=false");
      send(chn, wire::ChannelFlowOk{true});
      return;
    }
    if (std::holds_alternative<wire::ChannelFlowOk>(m)) {
      if (ch.flows_unanswered > 0) --ch.flows_unanswered;
      return;
    }
    if (const auto* c = std::get_if<wire::BasicConsume>(&m)) {
      const std::string queue(c->queue);
      if (queue == direct_reply_to && !c->no_ack) {
        config_.world->library_faults.push_back("PRECONDITION_FAILED - reply consumer cannot acknowledge");
        begin_channel_close(chn, 406, config_.world->library_faults.back(), 60, 20);
        return;
      }
      if (queue != direct_reply_to && !config_.world->queues.contains(queue)) {
        begin_channel_close(chn, 404, "NOT_FOUND - no queue '" + queue + "' in vhost '/'", 60, 20);
        return;
      }
      std::string tag = c->consumer_tag.empty() ? "amq.ctag-" + std::to_string(++consumers_) : std::string(c->consumer_tag);
      if (consumers_by_tag_.contains(tag)) {
        begin_channel_close(chn, 530, "NOT_ALLOWED - attempt to reuse consumer tag '" + tag + "'", 60, 20);
        return;
      }
      tag_ = tag;
      consume_channel_ = chn;
      queue_name_ = queue;
      auto arguments = c->arguments.to_table();
      const bool stream = arguments.ok() && arguments->find("x-stream-offset") != nullptr;
      std::uint64_t cursor = 0;
      if (auto s = config_.world->streams.find(queue); s != config_.world->streams.end()) {
        // RabbitMQ 3.10: a stream consumer needs a prefetch and acks; it starts where
        // x-stream-offset says ("next" when absent), clamped to what the stream holds.
        if (ch.prefetch == 0 || c->no_ack)
          return begin_channel_close(chn, 406, "PRECONDITION_FAILED - consumer prefetch count is not set for '" + queue + "'", 60, 20);
        if (config_.world->streams_without_local_replica)
          return begin_channel_close(chn, 406, "PRECONDITION_FAILED - queue 'queue '" + queue +
                                                   "' in vhost '/'' does not have a replica on the local node", 60, 20);
        const auto& log = s->second;
        cursor = log.end();
        if (const auto* v = arguments.ok() ? arguments->find("x-stream-offset") : nullptr) {
          if (auto n = v->integer()) cursor = std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(*n, 0)), log.first, log.end());
          else if (auto t = ModelQueueInfo::text(*v); t == "first") cursor = log.first;
          else if (t == "last") cursor = log.entries.empty() ? log.end() : log.end() - 1;
        }
      }
      consumers_by_tag_[tag] = ModelConsumer{chn, queue, c->no_ack, stream, ch.prefetch, cursor};
      if (!c->no_wait) send(chn, wire::BasicConsumeOk{tag});
      config_.world->dispatch();
      return;
    }
    if (const auto* c = std::get_if<wire::BasicCancel>(&m)) {
      consumers_by_tag_.erase(std::string(c->consumer_tag));
      if (!c->no_wait) send(chn, wire::BasicCancelOk{c->consumer_tag});
      return;
    }
    if (const auto* g = std::get_if<wire::BasicGet>(&m)) {
      const std::string queue(g->queue);
      auto q = config_.world->queues.find(queue);
      if (q == config_.world->queues.end()) {
        begin_channel_close(chn, 404, "NOT_FOUND - no queue '" + queue + "' in vhost '/'", 60, 70);
        return;
      }
      if (q->second.empty()) {
        send(chn, wire::BasicGetEmpty{});
        return;
      }
      auto msg = std::move(q->second.front());
      q->second.pop_front();
      const std::uint64_t dtag = ++ch.next_delivery_tag;
      std::optional<wire::FieldTable> added;
      const wire::BasicProperties p = stored_properties(msg, added, std::nullopt);
      (void)wire::write_content(out_, chn,
                                wire::BasicGetOk{dtag, msg.redelivered, "", queue, static_cast<std::uint32_t>(q->second.size())},
                                p, std::as_bytes(std::span{msg.body.data(), msg.body.size()}), frame_max_);
      if (!g->no_ack) ch.unacked.emplace(dtag, Unacked{queue, std::move(msg)});
      return;
    }
    if (const auto* a = std::get_if<wire::BasicAck>(&m)) return settle(chn, ch, a->delivery_tag, a->multiple, std::nullopt);
    if (const auto* n = std::get_if<wire::BasicNack>(&m)) return settle(chn, ch, n->delivery_tag, n->multiple, n->requeue);
    if (const auto* r = std::get_if<wire::BasicReject>(&m)) return settle(chn, ch, r->delivery_tag, false, r->requeue);
    connection_error(540, "NOT_IMPLEMENTED - the fake broker does not know " +
                              std::visit([](const auto& x) { return std::string(x.name); }, m));
  }

  // basic.ack (requeue empty) or nack/reject of deliveries; an unknown tag closes the channel.
  void settle(std::uint16_t chn, ModelChannel& ch, std::uint64_t tag, bool multiple, std::optional<bool> requeue_it) {
    std::vector<std::uint64_t> tags;
    if (multiple) {
      for (auto& [t, u] : ch.unacked)
        if (tag == 0 || t <= tag) tags.push_back(t);
    } else if (ch.unacked.contains(tag)) {
      tags.push_back(tag);
    }
    if (tags.empty() && !(multiple && tag == 0)) {
      config_.world->unknown_tags.push_back("PRECONDITION_FAILED - unknown delivery tag " + std::to_string(tag));
      begin_channel_close(chn, 406, "PRECONDITION_FAILED - unknown delivery tag " + std::to_string(tag), 60,
                          requeue_it ? 120 : 80);
      return;
    }
    for (auto t : tags) {
      auto u = std::move(ch.unacked.at(t));
      ch.unacked.erase(t);
      if (requeue_it && u.stream) config_.world->stream_rejected.push_back(BrokerWorld::key_of(u.message.body));
      if (u.from_stream) continue;  // a stream keeps its entries: settling only moves the credit on
      if (requeue_it && *requeue_it) {
        config_.world->return_to(u.queue, std::move(u.message));
      } else if (requeue_it) {
        config_.world->dead_letter(u.queue, std::move(u.message), "rejected");
      }
    }
    config_.world->dispatch();  // credit freed, or requeued messages
  }

  static constexpr std::string_view direct_reply_to = "amq.rabbitmq.reply-to";
  // The channel's consumer of amq.rabbitmq.reply-to, if it has one.
  const std::string* reply_consumer(std::uint16_t chn) const {
    for (const auto& [tag, c] : consumers_by_tag_)
      if (c.queue == direct_reply_to && c.channel == chn) return &tag;
    return nullptr;
  }
  // A server's answer to amq.rabbitmq.reply-to.<broker>.<channel>: to that channel's reply
  // consumer, if it is still there.
  bool deliver_reply(std::uint16_t chn, BrokerWorld::Message m) {
    auto chit = channels_.find(chn);
    const std::string* tag = reply_consumer(chn);
    if (gone_ || closing_ || chit == channels_.end() || chit->second.closing || !tag) return false;
    const std::string t = *tag;
    deliver_to(t, consumers_by_tag_.at(t), std::move(m));
    flush_async();
    return true;
  }
  friend bool route_reply(BrokerWorld& world, std::string_view routing_key, BrokerWorld::Message m);

  void model_published(std::uint16_t chn, Incoming in) {
    auto& world = *config_.world;
    const std::string key = BrokerWorld::key_of(in.body);
    ++published;
    ++world.received[key];
    auto& ch = channels_[chn];
    // Direct reply-to works only from a channel that consumes it (RabbitMQ: 406); the
    // request's reply_to becomes an address of that channel.
    std::string reply_to = in.reply_to;
    if (reply_to == direct_reply_to) {
      if (!reply_consumer(chn)) {
        // Not the library's doing when the broker cancelled the consumer and its basic.cancel
        // had not reached the client yet: no client can avoid that race.
        const std::string text = "PRECONDITION_FAILED - fast reply consumer does not exist";
        if (!ch.reply_consumer_cancelled) world.library_faults.push_back(text);
        return begin_channel_close(chn, 406, text, 60, 40);
      }
      reply_to = std::string(direct_reply_to) + "." + std::to_string(id_) + "." + std::to_string(chn);
    }
    // RabbitMQ checks user_id against the connection's user before routing: 406.
    if (!in.meta.user_id.empty() && in.meta.user_id != world.user) {
      world.user_id_refused.push_back("PRECONDITION_FAILED - user_id property set to '" + in.meta.user_id +
                                      "' but authenticated user was '" + world.user + "'");
      return begin_channel_close(chn, 406, world.user_id_refused.back(), 60, 40);
    }
    std::uint64_t seq = 0;
    if (ch.confirm) seq = ++ch.seq;
    bool routed = false;
    BrokerWorld::Message message = std::move(in.meta);
    message.body = in.body;
    message.correlation_id = in.correlation_id;
    message.reply_to = reply_to;
    message.routing_key = in.routing_key;
    if (in.exchange.empty() && in.routing_key == "rpc") {
      routed = true;
      // An RPC server that answers at once, through direct reply-to on this channel.
      if (in.reply_to == direct_reply_to)
        rpc_replies_.push_back({chn, BrokerWorld::Message{"re:" + in.body, in.correlation_id, {}, false}});
    } else if (in.exchange.empty() && in.routing_key.starts_with(std::string(direct_reply_to) + ".")) {
      routed = route_reply(world, in.routing_key, message);
    } else if (in.exchange.empty()) {
      if (world.queues.contains(in.routing_key)) {
        routed = true;
        world.enqueue(in.routing_key, message);
      }
    } else {
      auto queues = world.exchanges.route(in.exchange, in.routing_key);
      if (!queues) return begin_channel_close(chn, 404, "NOT_FOUND - no exchange '" + in.exchange + "' in vhost '/'", 60, 40);
      for (const auto& name : *queues)
        if (world.queues.contains(name)) {
          routed = true;
          world.enqueue(name, message);
        }
    }
    if (!routed && in.mandatory) {
      // With the message's properties, as RabbitMQ returns it: the client matches the return
      // to its publish by them.
      ++world.returned[key];
      std::optional<wire::FieldTable> added;
      const wire::BasicProperties p = stored_properties(message, added, std::nullopt);
      (void)wire::write_content(out_, chn, wire::BasicReturn{312, "NO_ROUTE", in.exchange, in.routing_key}, p,
                                std::as_bytes(std::span{in.body.data(), in.body.size()}), frame_max_);
    }
    if (ch.confirm) {
      if (nack_next_) {
        nack_next_ = false;
        world.nacked.insert(key);
        send(chn, wire::BasicNack{seq, false, false});
      } else {
        seq_keys_[{chn, seq}] = key;
        if (config_.hold_confirms) held_confirms_.push_back({chn, seq});
        else confirm(chn, seq);
      }
    }
    auto replies = std::move(rpc_replies_);
    rpc_replies_.clear();
    for (auto& [channel, msg] : replies) (void)deliver_reply(channel, std::move(msg));
    world.dispatch();
  }

  void model_connection_method(const wire::Method& m) {
    if (std::holds_alternative<wire::ConnectionStartOk>(m)) {
      if (config_.refuse_login)
        send(0, wire::ConnectionClose{403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN", 0, 0});
      else
        send(0, wire::ConnectionTune{2047, 131072, config_.heartbeat_s});
    } else if (const auto* t = std::get_if<wire::ConnectionTuneOk>(&m)) {
      heartbeat_s_ = t->heartbeat;
      frame_max_ = t->frame_max == 0 ? 131072 : t->frame_max;
      if (heartbeat_s_ > 0 && on_tuned) on_tuned(heartbeat_s_);
    } else if (std::holds_alternative<wire::ConnectionOpen>(m)) {
      if (closing_) return;
      open_ = true;
      send(0, wire::ConnectionOpenOk{});
    } else if (std::holds_alternative<wire::ConnectionClose>(m)) {
      closing_ = true;
      send(0, wire::ConnectionCloseOk{});
    } else if (std::holds_alternative<wire::ConnectionCloseOk>(m)) {
      closing_ = true;
    }
  }

  bool handling_ = false;  // inside handle(): output goes back with the write's answer
  bool open_ = false, closing_ = false, silent_ = false, gone_ = false;
  bool blocked_ = false, paused_ = false, nack_next_ = false;
  std::uint16_t heartbeat_s_ = 0;
  std::uint32_t frame_max_ = 131072;
  int generated_ = 0;
  std::deque<OwnedFrame> backlog_;
  std::map<std::uint16_t, ModelChannel> channels_;
  std::map<std::string, ModelConsumer> consumers_by_tag_;
  std::map<std::pair<std::uint16_t, std::uint64_t>, std::string> seq_keys_;  // unconfirmed: publish key
  std::vector<std::pair<std::uint16_t, std::uint64_t>> held_confirms_;
  std::vector<std::pair<std::uint16_t, BrokerWorld::Message>> rpc_replies_;  // by channel
  int id_ = 0;  // in the world, for direct reply-to addresses

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

inline void BrokerWorld::dispatch() {
  // Round by round, so consumers on several connections share a queue as on RabbitMQ.
  for (bool any = true; any;) {
    any = false;
    auto brokers_now = brokers;
    for (auto* b : brokers_now)
      if (std::find(brokers.begin(), brokers.end(), b) != brokers.end()) any = b->dispatch_some() || any;
  }
}

inline void BrokerWorld::enqueue(const std::string& name, Message m) {
  m.redelivered = false;
  m.delivery_count = 0;
  m.expires_at.reset();
  if (auto s = streams.find(name); s != streams.end()) return s->second.entries.push_back(std::move(m));
  if (auto info = queue_info.find(name); info != queue_info.end() && info->second.ttl_ms && clock)
    m.expires_at = clock() + std::chrono::milliseconds(*info->second.ttl_ms);
  queues[name].push_back(std::move(m));
}

inline void BrokerWorld::dead_letter(const std::string& from, Message m, const std::string& reason) {
  auto info = queue_info.find(from);
  if (info == queue_info.end() || !info->second.dlx) return;
  const std::string exchange = *info->second.dlx;
  const std::string key = info->second.dlrk.value_or(m.routing_key);
  if (!m.table) m.table.emplace();  // headers the model could not decode are replaced, as RabbitMQ would fail to
  add_death(*m.table, from, reason, exchange, m.routing_key);
  m.headers.clear();
  dead_lettered.push_back(from + " " + reason + " " + m.message_id);
  m.routing_key = key;
  std::vector<std::string> targets;
  if (exchange.empty()) targets.push_back(key);
  else if (auto r = exchanges.route(exchange, key)) targets = *r;
  for (const auto& t : targets)
    if (queues.contains(t)) enqueue(t, m);
}

inline std::size_t BrokerWorld::truncate(const std::string& stream, std::size_t n) {
  auto it = streams.find(stream);
  if (it == streams.end()) return 0;
  auto& s = it->second;
  std::uint64_t keep_from = s.entries.empty() ? s.end() : s.end() - 1;
  for (auto* b : brokers)
    for (const auto& [tag, c] : b->consumers_by_tag_)
      if (c.queue == stream) keep_from = std::min(keep_from, std::max(c.cursor, s.first));
  n = std::min<std::size_t>(n, static_cast<std::size_t>(keep_from - s.first));
  s.entries.erase(s.entries.begin(), s.entries.begin() + static_cast<std::ptrdiff_t>(n));
  s.first += n;
  return n;
}

inline std::optional<engine::Instant> BrokerWorld::next_expiry() const {
  std::optional<engine::Instant> next;
  for (const auto& [name, q] : queues)
    if (!q.empty() && q.front().expires_at && (!next || *q.front().expires_at < *next)) next = q.front().expires_at;
  return next;
}

inline void BrokerWorld::expire(engine::Instant now) {
  for (auto& [name, q] : queues)
    while (!q.empty() && q.front().expires_at && *q.front().expires_at <= now) {
      auto m = std::move(q.front());
      q.pop_front();
      dead_letter(name, std::move(m), "expired");
    }
  dispatch();
}

// amq.rabbitmq.reply-to.<broker>.<channel>: the caller's reply consumer, wherever it is.
inline bool route_reply(BrokerWorld& world, std::string_view routing_key, BrokerWorld::Message m) {
  auto rest = routing_key.substr(FakeBroker::direct_reply_to.size() + 1);
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos) return false;
  const int id = std::stoi(std::string(rest.substr(0, dot)));
  const auto channel = static_cast<std::uint16_t>(std::stoi(std::string(rest.substr(dot + 1))));
  for (auto* b : world.brokers)
    if (b->id_ == id) return b->deliver_reply(channel, std::move(m));
  return false;
}

inline std::vector<std::string> FakeBroker::unacked_from(const std::string& queue) const {
  std::vector<std::string> out;
  for (const auto& [id, ch] : channels_)
    for (const auto& [tag, u] : ch.unacked)
      if (u.queue == queue) out.push_back(u.message.body);
  return out;
}

class FakeDriver final : public client::Driver {
 public:
  // mute: accepts the connection, then never says a word (a host that hangs in the handshake).
  enum class Host { refuse, black_hole, broker, refuse_login, broker_holding_confirms, mute };

  std::map<std::uint16_t, Host> hosts;  // by port; a port not listed refuses
  // Host::broker on a port listed here runs a broker with this config (the model broker when
  // it names a world).
  std::map<std::uint16_t, FakeBroker::Config> broker_configs;
  int dials = 0;
  std::vector<std::uint16_t> dialled;  // every dial's port, in order
  std::size_t stream_writes = 0;       // writes the clients' streams made, all of them
  // A model broker whose TTLs run on this clock: its queues' heads expire as time passes.
  void run_world_clock(BrokerWorld& world) {
    timed_world_ = &world;
    world.clock = [this] { return now_; };
  }

  engine::Instant now() override { return now_; }

  std::unique_ptr<client::Stream> dial(const client::Endpoint& endpoint, engine::Duration timeout,
                                       std::optional<client::TlsSettings>, client::StreamEvents& events) override {
    ++dials;
    dialled.push_back(endpoint.port);
    auto it = hosts.find(endpoint.port);
    const Host host = it == hosts.end() ? Host::refuse : it->second;
    auto stream = std::make_unique<FakeStream>(*this, events, endpoint);
    stream->last_write = now_;
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
      case Host::mute:
        post([alive, s] {
          if (*alive) s->events->on_connected();
        });
        break;
      case Host::broker:
      case Host::refuse_login:
      case Host::broker_holding_confirms: {
        auto config = FakeBroker::Config{host == Host::refuse_login, host == Host::broker_holding_confirms};
        if (auto c = broker_configs.find(endpoint.port); c != broker_configs.end() && host == Host::broker) config = c->second;
        s->broker = std::make_unique<FakeBroker>(config);
        s->broker->push = [this, alive, s](std::vector<std::byte> bytes) {
          if (s->stalled) return;
          post([alive, s, bytes = std::move(bytes)] {
            if (*alive) s->receive(bytes);
          });
        };
        s->broker->on_tuned = [this, s](std::uint16_t heartbeat_s) {
          s->heartbeat_s = heartbeat_s;
          s->heartbeat_at = now_ + std::chrono::seconds(heartbeat_s);
        };
        live_.push_back(s);
        post([alive, s] {
          if (*alive) s->events->on_connected();
        });
        break;
      }
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
  // Moves the clock by `d` and nothing else: the time a callback's own work takes.
  void skip(engine::Duration d) { now_ += d; }
  // Moves the clock by `d`, firing each timer that falls due, in deadline order.
  void advance(engine::Duration d) {
    const auto until = now_ + d;
    for (;;) {
      run();
      FakeTimer* next = nullptr;
      for (auto* t : timers_)
        if (t->deadline && *t->deadline <= until && (!next || *t->deadline < *next->deadline)) next = t;
      // A model broker's heartbeat, when it falls due before the next timer.
      FakeStream* beat = nullptr;
      for (auto* st : live_)
        if (st->heartbeat_at && *st->heartbeat_at <= until && (!next || *st->heartbeat_at < *next->deadline) &&
            (!beat || *st->heartbeat_at < *beat->heartbeat_at))
          beat = st;
      // A model broker that has heard nothing from its client for two heartbeat intervals
      // drops the connection, as RabbitMQ does (a reset, no connection.close).
      FakeStream* deaf = nullptr;
      std::optional<engine::Instant> deaf_at;
      for (auto* st : live_) {
        if (!st->heartbeat_s || st->stalled || !st->broker->world() || !st->broker->checks_heartbeats()) continue;
        const auto at = st->last_write + 2 * std::chrono::seconds(st->heartbeat_s);
        if (at <= until && (!next || at < *next->deadline) && (!beat || at < *beat->heartbeat_at) && (!deaf_at || at < *deaf_at)) {
          deaf = st;
          deaf_at = at;
        }
      }
      // A TTL queue's head expiring before anything else falls due.
      if (timed_world_)
        if (auto at = timed_world_->next_expiry();
            at && *at <= until && (!next || *at < *next->deadline) && (!beat || *at < *beat->heartbeat_at) && (!deaf_at || *at < *deaf_at)) {
          now_ = std::max(now_, *at);
          timed_world_->expire(now_);
          continue;
        }
      if (deaf) {
        now_ = *deaf_at;
        deaf->broker->world()->heartbeat_missed.push_back(std::to_string(deaf->endpoint.port));
        deaf->fail(make_error(errc::connection_lost, "connection reset by peer (the broker missed the client's heartbeats)"));
        continue;
      }
      if (beat) {
        now_ = *beat->heartbeat_at;
        beat->heartbeat_at = now_ + std::chrono::seconds(beat->heartbeat_s);
        if (!beat->stalled) beat->broker->send_heartbeat();
        continue;
      }
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
  // ---- faults and what the simulation checks (tests/sim/)
  // What the client asked of the newest open stream to `port` for read batching, if anything.
  [[nodiscard]] std::optional<client::ReadBatching> read_batching_on(std::uint16_t port) {
    FakeStream* s = stream_on(port);
    return s ? s->read_batching : std::nullopt;
  }
  // What the client last told the newest open stream to `port` (set_replies_owed), and how
  // often it told it anything; nullopt without such a stream.
  [[nodiscard]] std::optional<std::pair<bool, int>> replies_owed_on(std::uint16_t port) {
    FakeStream* s = stream_on(port);
    return s ? std::optional(std::pair{s->replies_owed, s->replies_owed_calls}) : std::nullopt;
  }
  // What the client said each read handed to the newest open stream to `port` completed
  // (note_deliveries), in order.
  [[nodiscard]] std::vector<std::size_t> deliveries_noted_on(std::uint16_t port) {
    FakeStream* s = stream_on(port);
    return s ? s->deliveries_noted : std::vector<std::size_t>{};
  }
  // The newest open stream dialled to `port`, if any.
  [[nodiscard]] FakeBroker* broker_on(std::uint16_t port) {
    FakeStream* s = stream_on(port);
    return s ? s->broker.get() : nullptr;
  }
  // The connection is cut (reset by peer): the client hears it on its next turn.
  bool cut(std::uint16_t port) {
    FakeStream* s = stream_on(port);
    if (!s) return false;
    post([alive = s->alive, s] {
      if (*alive) s->fail(make_error(errc::connection_lost, "connection reset by peer"));
    });
    return true;
  }
  // The network stops: writes never complete, nothing arrives, heartbeats included.
  bool stall(std::uint16_t port) {
    FakeStream* s = stream_on(port);
    if (!s) return false;
    s->stalled = true;
    return true;
  }
  // The stream holds what the broker sends (a slow reader) until released.
  bool hold_input(std::uint16_t port, bool hold) {
    FakeStream* s = stream_on(port);
    if (!s) return false;
    s->hold(hold);
    return true;
  }
  // The broker's bytes to this connection arrive split into pieces of 1-24 bytes, each on
  // its own turn (sizes drawn from `seed`), so every frame boundary is crossed mid-frame.
  bool split_reads(std::uint16_t port, std::uint64_t seed) {
    FakeStream* s = stream_on(port);
    if (!s) return false;
    s->split = seed;
    return true;
  }
  [[nodiscard]] bool stalled(std::uint16_t port) {
    FakeStream* s = stream_on(port);
    return s && s->stalled;
  }
  // What the loop still has: armed timers, posted work, streams not closed.
  [[nodiscard]] std::size_t armed_timers() const {
    return static_cast<std::size_t>(std::count_if(timers_.begin(), timers_.end(), [](const FakeTimer* t) { return t->deadline.has_value(); }));
  }
  // Every timer the client holds, armed or not: one that outlives its stream would outlive
  // the application's io_context on Asio.
  [[nodiscard]] std::size_t timers() const { return timers_.size(); }
  [[nodiscard]] std::size_t posted() const { return posted_.size(); }
  [[nodiscard]] std::size_t open_streams() const { return open_.size(); }
  [[nodiscard]] std::vector<std::uint16_t> open_stream_ports() const {
    std::vector<std::uint16_t> out;
    for (auto* s : open_) out.push_back(s->endpoint.port);
    return out;
  }

  // The network and the brokers recover: a stalled or silent connection is cut (the peer
  // finds it dead), held input is let go, blocks are lifted and held confirms sent.
  void heal() {
    auto open = open_;
    for (auto* s : open) {
      if (s->stalled || (s->broker && s->broker->is_silent())) {
        post([alive = s->alive, s] {
          if (*alive) s->fail(make_error(errc::connection_lost, "connection reset by peer"));
        });
        continue;
      }
      s->hold(false);
      if (s->broker) {
        s->broker->set_blocked(false);
        s->broker->hold_confirms(false);
        s->broker->nack_next_publish(false);
      }
    }
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
    FakeStream(FakeDriver& d, client::StreamEvents& e, client::Endpoint ep) : driver(d), events(&e), endpoint(std::move(ep)) {
      driver.open_.push_back(this);
    }
    ~FakeStream() override { close(); }

    void write(std::span<const std::span<const std::byte>> parts) override {
      if (stalled) return;  // never completes
      ++driver.stream_writes;
      last_write = driver.now_;
      std::vector<std::byte> bytes;
      for (auto p : parts) bytes.insert(bytes.end(), p.begin(), p.end());
      auto reply = broker ? broker->handle(bytes) : std::vector<std::byte>{};
      const std::size_t n = bytes.size();
      driver.post([alive = alive, this, n, reply = std::move(reply)] {
        if (!*alive) return;
        events->on_written(n);
        if (!*alive || reply.empty()) return;
        receive(reply);
      });
    }
    // Bytes from the broker: now, or held while the client is not reading (or a fault holds
    // them). Split, they arrive in small pieces, each on a turn of its own.
    void receive(const std::vector<std::byte>& bytes) {
      if (stalled) return;
      if (!split && reading && !holding && held.empty()) return events->on_bytes(bytes);
      held.insert(held.end(), bytes.begin(), bytes.end());
      drain();
    }
    void hold(bool h) {
      holding = h;
      set_reading(reading);
    }
    void set_reading(bool r) override {
      reading = r;
      drain();
    }
    void set_read_batching(client::ReadBatching b) override { read_batching = b; }
    void set_replies_owed(bool owed) override {
      replies_owed = owed;
      ++replies_owed_calls;
    }
    void note_deliveries(std::size_t completed) override { deliveries_noted.push_back(completed); }
    // Hands what is held to the client on a later turn: all of it, or (split) the next piece.
    void drain() {
      if (drain_posted || held.empty() || !reading || holding) return;
      drain_posted = true;
      driver.post([alive = alive, this] {
        if (!*alive) return;
        drain_posted = false;
        if (held.empty() || !reading || holding) return;
        std::size_t n = held.size();
        if (split) {
          *split = *split * 6364136223846793005ull + 1442695040888963407ull;
          n = std::min<std::size_t>(n, 1 + (*split >> 33) % 24);
        }
        std::vector<std::byte> piece(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(n));
        held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(n));
        events->on_bytes(piece);
        if (*alive) drain();
      });
    }
    void close() override {
      if (!*alive) return;
      *alive = false;
      std::erase(driver.live_, this);
      std::erase(driver.open_, this);
      if (broker) broker->disconnect();
      if (dial_timer) dial_timer->cancel();
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
    std::optional<client::ReadBatching> read_batching;  // what the client asked for, if anything
    bool replies_owed = false;  // what the client last said (set_replies_owed)
    int replies_owed_calls = 0;
    std::vector<std::size_t> deliveries_noted;  // what the client said of each read (note_deliveries)
    bool reading = true;
    std::vector<std::byte> held;
    bool holding = false;  // a fault holds what arrives
    bool stalled = false;  // a fault: nothing moves either way
    bool drain_posted = false;
    std::optional<std::uint64_t> split;  // set: the broker's bytes arrive in pieces (this seeds their sizes)
    engine::Instant last_write;          // when the client last wrote (the broker's heartbeat check)
    std::uint16_t heartbeat_s = 0;
    std::optional<engine::Instant> heartbeat_at;  // the broker's next heartbeat
  };

  FakeStream* stream_on(std::uint16_t port) {
    for (auto it = open_.rbegin(); it != open_.rend(); ++it)
      if ((*it)->endpoint.port == port) return *it;
    return nullptr;
  }

  engine::Instant now_ = engine::Instant{} + 1000s;
  BrokerWorld* timed_world_ = nullptr;
  std::deque<std::function<void()>> posted_;
  std::vector<FakeTimer*> timers_;
  std::vector<FakeStream*> live_;
  std::vector<FakeStream*> open_;  // every stream not closed, brokers or not
};

}  // namespace warren::test
