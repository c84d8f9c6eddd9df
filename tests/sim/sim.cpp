// The simulation's world: the client objects under test, the commands, the callback ledger
// and the invariants (see sim.hpp).
#include "sim/sim.hpp"

#include <cstdlib>
#include <map>
#include <sstream>

namespace warren::sim {

using namespace std::chrono_literals;
using client::Connection;

namespace {

constexpr std::uint16_t ports_by_fault[] = {5001, 5002, 5003, 5004};
constexpr std::uint16_t ports_by_connect[] = {5001, 5006, 5007, 5001};  // by b % 4: half to the broker
constexpr engine::Duration advances[] = {0ms, 10ms, 100ms, 1000ms, 3000ms, 11000ms};
constexpr engine::Duration timeouts[] = {100ms, 1000ms, 5000ms, 30000ms};

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span{s.data(), s.size()}); }

}  // namespace

const char* name(Op op) {
  switch (op) {
#define X(n) \
  case Op::n: \
    return #n;
    X(connect) X(open_channel) X(close_channel) X(declare) X(publish) X(publish_no_callback) X(publish_null_callback)
    X(publish_large) X(confirm_select) X(consume) X(consume_stream) X(cancel) X(receive) X(ack) X(ack_dead) X(get)
    X(rpc_start) X(rpc_call)
    X(close_connection) X(session_start) X(session_channel) X(session_open_channel) X(session_publish) X(session_ack) X(session_close)
    X(pool_borrow) X(pool_release) X(pool_close_lease) X(pool_close) X(advance) X(cut) X(stall)
    X(broker_close_channel) X(broker_close_connection) X(blocked) X(unblocked) X(silent) X(broker_cancel)
    X(hold_confirms) X(release_confirms) X(nack_next) X(hold_input) X(release_input) X(other_publisher) X(host_5004)
    X(exchange_declare) X(queue_bind) X(publish_exchange) X(channel_flow) X(rpc_serve) X(rpc_server_drop)
    X(drop_connection) X(drop_rpc) X(drop_session) X(drop_pool) X(broker_flow) X(split_reads)
#undef X
  }
  return "?";
}

void showValue(const Cmd& c, std::ostream& os) { os << "{Op::" << name(c.op) << ", " << c.a << ", " << c.b << "}"; }
std::ostream& operator<<(std::ostream& os, const Cmd& c) {
  showValue(c, os);
  return os;
}

// ---- the ledger: every callback handed in, how often it ran, and the final reports

struct Sim::Impl {
  Sim& sim;
  test::FakeDriver& driver;
  test::BrokerWorld& world;
  std::uint64_t clock = 0;  // a counter of events, to order registrations and reports

  struct Scope {
    std::string name;
    std::optional<std::uint64_t> final_at;  // when its final close report ran
  };
  std::vector<Scope> scopes;
  struct Callback {
    std::string what;
    int scope = 0;
    std::uint64_t registered = 0;
    int calls = 0;
    bool exactly_once = true;  // on_closed and setup hooks are not
    bool final_report = false;
  };
  std::vector<Callback> callbacks;
  std::vector<std::string> violations;

  // ---- the Connection(s)
  // A Message kept for a later ack, with the handle of the channel it came from.
  struct Held {
    client::Channel channel;
    client::Message message;
  };
  // A subscription: the Consumer arrives with consume-ok and is kept (dropping it would
  // cancel the subscription) until the cancel op, and after it.
  struct Sub {
    client::Channel channel;
    std::string tag;
    bool stream = false;    // read with receive(); push (on_delivery) otherwise
    bool auto_ack = false;
    bool live = true;       // consume-ok came (or is awaited) and it has not ended
    bool confirmed = false;
    client::Consumer consumer;  // empty until consume-ok
  };
  struct Conn {
    std::shared_ptr<Connection> c;  // null once the simulation dropped it
    int scope = 0;
    bool user_closed = false;
    bool ready = false;
    std::vector<client::Channel> channels;
    std::vector<Held> unacked;
    std::vector<Sub> consumers;
    std::shared_ptr<client::RpcClient> rpc;
    std::vector<std::shared_ptr<client::RpcServer>> servers;
  };
  std::vector<Conn> conns;
  std::map<std::string, int> received_by_tag;  // deliveries reaching on_delivery or a receive, by our tags
  int next_tag = 0;

  // ---- the Sessions (at most three at once, all on the same hosts)
  struct SessionState {
    std::shared_ptr<client::Session> s;  // null once the simulation dropped it
    int scope = -1;
    bool closed = false;
    bool status_closed = false;  // on_status reported closed
    // Its recovering channels; kept after the session is dropped when the drop said so.
    std::vector<std::shared_ptr<client::RecoveringChannel>> rchannels;
  };
  std::vector<SessionState> sessions;
  int next_session_queue = 0;
  int setups_refused = 0;
  std::vector<client::Message> session_unacked;
  std::vector<client::Consumer> session_consumers;
  std::vector<client::Channel> session_plain;  // Session::open_channel's

  std::map<std::string, int> returned_seen;  // on_returned, by publish key

  // ---- the Pool
  std::shared_ptr<client::Pool> pool;
  int pools = 0;
  int pool_scope = -1;
  bool pool_closed = false;
  struct HeldLease {
    client::Lease lease;
    int scope = 0;  // its pool's, or its own once the pool was dropped
  };
  std::vector<HeldLease> leases;

  int next_body = 0;
  std::set<std::string> confirmed;  // publish keys the client reported confirmed

  Impl(Sim& s) : sim(s), driver(s.driver), world(s.world) {
    test::FakeBroker::Config model{false, false, &world, 1};
    for (std::uint16_t port : {5001, 5002, 5003, 5004}) {
      driver.hosts[port] = test::FakeDriver::Host::broker;
      driver.broker_configs[port] = model;
    }
    driver.hosts[5004] = test::FakeDriver::Host::refuse;
    driver.hosts[5006] = test::FakeDriver::Host::black_hole;
    driver.hosts[5007] = test::FakeDriver::Host::mute;
    // The broker already has two queues (durable ones, say); q2 exists once declared, q3 never.
    world.queues["q0"];
    world.queues["q1"];
    world.queues["rq"];  // the simulated RpcServer's requests
  }

  static client::ClientOptions options() {
    client::ClientOptions o;
    o.connect_timeout = 3000ms;
    o.engine.handshake_timeout = 3000ms;
    o.engine.request_timeout = 2000ms;
    o.engine.close_timeout = 2000ms;
    return o;
  }

  int new_scope(std::string n) {
    scopes.push_back(Scope{std::move(n), std::nullopt});
    return static_cast<int>(scopes.size()) - 1;
  }
  int reg(int scope, std::string what, bool exactly_once = true, bool final_report = false) {
    callbacks.push_back(Callback{std::move(what), scope, ++clock, 0, exactly_once, final_report});
    return static_cast<int>(callbacks.size()) - 1;
  }
  void violation(std::string text) {
    for (const auto& skip : ignored())
      if (text.find(skip) != std::string::npos) return;
    violations.push_back(std::move(text));
  }
  // SIM_IGNORE="text|text": violations containing one of these are not reported, to look
  // past a known failure for the next one. SIM_OFF="op,op": those commands do nothing.
  static std::vector<std::string> split(const char* env, char sep) {
    std::vector<std::string> out;
    if (!env) return out;
    std::string s(env);
    for (std::size_t at = 0; at <= s.size();) {
      auto next = s.find(sep, at);
      if (next == std::string::npos) next = s.size();
      if (next > at) out.push_back(s.substr(at, next - at));
      at = next + 1;
    }
    return out;
  }
  static const std::vector<std::string>& ignored() {
    static const auto v = split(std::getenv("SIM_IGNORE"), '|');
    return v;
  }
  static bool off(Op op) {
    static const auto v = split(std::getenv("SIM_OFF"), ',');
    return std::find(v.begin(), v.end(), std::string(name(op))) != v.end();
  }
  // A callback ran.
  void hit(int id) {
    auto& cb = callbacks[static_cast<std::size_t>(id)];
    ++cb.calls;
    const std::string who = cb.what + " (" + scopes[static_cast<std::size_t>(cb.scope)].name + ")";
    if (cb.exactly_once && cb.calls == 2) violation("exactly once: " + who + " ran twice");
    auto& scope = scopes[static_cast<std::size_t>(cb.scope)];
    if (!cb.final_report && scope.final_at && cb.registered < *scope.final_at)
      violation("exactly once: " + who + " ran after the final close report of " + scope.name);
  }
  void final_report(int id) {
    hit(id);
    auto& scope = scopes[static_cast<std::size_t>(callbacks[static_cast<std::size_t>(id)].scope)];
    if (!scope.final_at) scope.final_at = ++clock;
  }

  // ---- publishes: the outcome against what the broker did
  client::Callback<engine::PublishOutcome> settled(int id, std::string key) {
    return [this, id, key](Result<engine::PublishOutcome> r) {
      hit(id);
      if (r.ok() && *r == engine::PublishOutcome::confirmed) {
        if (!world.acked.contains(key)) violation("confirms: " + key + " reported confirmed, the broker never acked it");
        confirmed.insert(key);
      }
    };
  }
  std::string body(bool large = false) {
    std::string b = "m" + std::to_string(++next_body);
    if (large) b += ":" + std::string(100 * 1024, 'x');
    return b;
  }

  // The newest connection, unless it was dropped.
  Conn* conn() { return conns.empty() || !conns.back().c ? nullptr : &conns.back(); }

  // ---- stale handles: what a channel verb is called on. An empty handle stands in where
  // there is no channel yet; a closed one is a channel the broker (or a timeout) closed. A
  // verb on either must fail and send nothing: a handle never reaches a newer channel that
  // reuses its number.
  struct Target {
    client::Channel ch;
    bool empty = false;
    bool stale = false;
    std::size_t sent_before = 0;
    std::string what;
  };
  // Every method any broker has read so far. Between commands the loop is drained, so what a
  // verb sends reaches the broker inside the call (unless the stream is stalled or blocked).
  std::size_t methods_sent() const {
    std::size_t n = 0;
    for (const auto* b : world.brokers) n += b->methods.size();
    return n;
  }
  Target target(const Conn& c, int a, std::string what) {
    Target t;
    t.empty = c.channels.empty();
    if (!t.empty) t.ch = c.channels[static_cast<std::size_t>(a) % c.channels.size()];
    t.stale = !t.ch.is_open();
    t.sent_before = methods_sent();
    t.what = std::move(what) + (t.empty ? " on an empty channel handle" : t.stale ? " on a closed channel handle" : "");
    return t;
  }
  // Right after the verb returned: nothing reached a broker for an empty or closed handle.
  void sent_nothing(const Target& t) {
    if ((t.empty || t.stale) && methods_sent() != t.sent_before)
      violation("stale handles: " + t.what + " sent the broker " + std::to_string(methods_sent() - t.sent_before) +
                " method(s)");
  }
  // The verb's result: an empty handle fails with invalid_argument, a closed one fails.
  template <class T>
  void refused(const Target& t, const Result<T>& r) {
    if (t.empty && (r.ok() || r.error().code != make_error_code(errc::invalid_argument)))
      violation("stale handles: " + t.what + " did not fail with invalid_argument: " +
                (r.ok() ? std::string("ok") : r.error().to_string()));
    else if (t.stale && r.ok())
      violation("stale handles: " + t.what + " succeeded");
  }

  // ---- commands
  void connect(int b) {
    const std::uint16_t port = ports_by_connect[b % 4];
    auto url = client::parse_url("amqp://guest:guest@fake:" + std::to_string(port) + "?heartbeat=1");
    conns.push_back(Conn{});
    const std::size_t index = conns.size() - 1;
    Conn& c = conns.back();
    c.scope = new_scope("connection " + std::to_string(index + 1));
    const int ready = reg(c.scope, "connect's on_ready");
    c.c = Connection::connect(driver, *url, options(), [this, index, ready](Result<void> r) {
      if (!r) final_report(ready);
      else hit(ready);
      conns[index].ready = r.ok();
    });
    const int closed = reg(c.scope, "on_closed", false, true);
    c.c->on_closed = [this, closed](const Error&) { final_report(closed); };
    c.c->on_returned = [this](const client::Delivery& d, const Error&) {
      const std::string key = test::BrokerWorld::key_of(d.body_text());
      if (++returned_seen[key] > world.returned[key])
        violation("returns: " + key + " reached on_returned " + std::to_string(returned_seen[key]) +
                  " times, the broker returned it " + std::to_string(world.returned[key]));
    };
  }

  void open_channel() {
    Conn* c = conn();
    if (!c) return;
    const int id = reg(c->scope, "open_channel");
    const std::size_t index = conns.size() - 1;
    c->c->open_channel([this, id, index](Result<client::Channel> ch) {
      hit(id);
      if (ch) conns[index].channels.push_back(std::move(*ch));
    });
  }

  void close_channel(int a) {
    Conn* c = conn();
    if (!c || c->channels.empty()) return;
    auto t = target(*c, a, "close_channel");
    c->channels.erase(c->channels.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(a) % c->channels.size()));
    t.ch.close([this, t, id = reg(c->scope, "close_channel")](Result<void> r) {
      hit(id);
      refused(t, r);
    });
    sent_nothing(t);
  }

  void declare(int a, int b) {
    Conn* c = conn();
    if (!c) return;
    const std::string q = "q" + std::to_string(b % 3);
    auto t = target(*c, a, "queue_declare " + q);
    t.ch.queue_declare({.name = q}, [this, t, id = reg(c->scope, "queue_declare " + q)](Result<client::QueueDeclared> r) {
      hit(id);
      refused(t, r);
    });
    sent_nothing(t);
  }

  void publish(int a, int b, bool large) {
    Conn* c = conn();
    if (!c) return;
    const std::string rk = "q" + std::to_string(b % 4);  // q3 is never declared
    publish_tracked(*c, a, {.routing_key = rk, .mandatory = b % 2 == 1}, body(large), "");
  }
  // One publish whose outcome is checked: settled once, honestly, and refused only as the
  // model says (`where` names a non-default exchange in the step's description).
  void publish_tracked(Conn& c, int a, const client::Publish& p, const std::string& text, const std::string& where) {
    const std::string key = test::BrokerWorld::key_of(text);
    auto t = target(c, a, "publish " + key + where);
    t.ch.publish(p, bytes_of(text),
                 [this, t, inner = settled(reg(c.scope, "publish " + key), key)](Result<engine::PublishOutcome> r) {
                   refused(t, r);
                   inner(std::move(r));
                 });
    sent_nothing(t);
  }
  void publish_no_callback(int a, int b) {
    Conn* c = conn();
    if (!c) return;
    const std::string text = body();
    auto t = target(*c, a, "publish (no callback)");
    auto r = t.ch.publish({.routing_key = "q" + std::to_string(b % 4)}, bytes_of(text));
    refused(t, r);
    sent_nothing(t);
  }
  void publish_null_callback(int a, int b) {
    Conn* c = conn();
    if (!c) return;
    const std::string text = body();
    auto t = target(*c, a, "publish (null callback)");
    t.ch.publish({.routing_key = "q" + std::to_string(b % 4)}, bytes_of(text), nullptr);
    sent_nothing(t);
  }

  void confirm_select(int a) {
    Conn* c = conn();
    if (!c) return;
    auto t = target(*c, a, "confirm_select");
    t.ch.confirm_select([this, t, id = reg(c->scope, "confirm_select")](Result<void> r) {
      hit(id);
      refused(t, r);
    });
    sent_nothing(t);
  }

  // A subscription, push (on_delivery, keeping d.take() for the ack op) or stream (read by the
  // receive op). Half the stream ones are stream subscriptions (x-stream-offset): their
  // deliveries must never be rejected; half have a buffer of 2.
  void consume(int a, int b, bool stream) {
    Conn* c = conn();
    if (!c) return;
    const std::string q = "q" + std::to_string(b % 3);
    const std::string tag = "k" + std::to_string(++next_tag);
    const std::size_t index = conns.size() - 1;
    auto t = target(*c, a, "consume " + tag);
    const bool auto_ack = b % 2 == 1;
    c->consumers.push_back(Sub{t.ch, tag, stream, auto_ack, true, false, {}});
    const std::size_t k = c->consumers.size() - 1;
    const int done = reg(c->scope, "consume " + tag + "'s done");
    client::ConsumeOptions o{.queue = q, .tag = tag, .auto_ack = auto_ack};
    if (stream && a >= 4) o.arguments = {{"x-stream-offset", "first"}};
    // A small buffer fills (the model broker ignores basic.qos): the connection stops reading
    // while it is full and unread, and reads again once receive drains it.
    if (stream && a % 2 == 1) o.prefetch = 2;
    auto started = [this, index, k, done, t](Result<client::Consumer> r) {
      hit(done);
      refused(t, r);
      auto& sub = conns[index].consumers[k];
      if (!r) {
        sub.live = false;
        return;
      }
      sub.confirmed = true;
      sub.consumer = std::move(*r);
      // Only a subscription that started owes its on_ended.
      const int ended = reg(conns[index].scope, "consume " + sub.tag + "'s on_ended");
      sub.consumer.on_ended([this, index, k, ended](const Error&) {
        hit(ended);
        conns[index].consumers[k].live = false;
      });
    };
    if (stream) {
      t.ch.consume(std::move(o), std::move(started));
    } else {
      t.ch.consume(
          std::move(o),
          [this, index, k](const client::Delivery& d) {
            auto& sub = conns[index].consumers[k];
            ++received_by_tag[sub.tag];
            if (!sub.auto_ack) conns[index].unacked.push_back(Held{sub.channel, d.take()});
          },
          std::move(started));
    }
    sent_nothing(t);
  }

  void cancel(int a) {
    Conn* c = conn();
    if (!c) return;
    std::vector<std::size_t> started;
    for (std::size_t k = 0; k < c->consumers.size(); ++k)
      if (c->consumers[k].confirmed) started.push_back(k);
    if (started.empty()) return;
    auto& sub = c->consumers[started[static_cast<std::size_t>(a) % started.size()]];
    sub.consumer.cancel([this, id = reg(c->scope, "cancel " + sub.tag)](Result<void>) { hit(id); });
  }

  // The next message of a stream consumer. A manual-ack one never hands out a message once it
  // ended (its unread ones went back) or once its channel closed (they cannot be settled).
  void receive(int a) {
    Conn* c = conn();
    if (!c) return;
    std::vector<std::size_t> streams;
    for (std::size_t k = 0; k < c->consumers.size(); ++k)
      if (c->consumers[k].confirmed && c->consumers[k].stream) streams.push_back(k);
    if (streams.empty()) return;
    const std::size_t index = conns.size() - 1;
    const std::size_t k = streams[static_cast<std::size_t>(a) % streams.size()];
    auto& sub = c->consumers[k];
    sub.consumer.receive([this, index, k, id = reg(c->scope, "receive " + sub.tag)](Result<client::Message> r) {
      hit(id);
      if (!r) return;
      auto& sub = conns[index].consumers[k];
      ++received_by_tag[sub.tag];
      if (sub.auto_ack) return;
      if (!sub.channel.is_open())
        violation("deliveries: " + sub.tag + "'s receive handed out delivery " + std::to_string(r->delivery_tag()) +
                  " of a closed channel");
      else if (!sub.live)
        violation("deliveries: " + sub.tag + "'s receive handed out delivery " + std::to_string(r->delivery_tag()) +
                  " after the subscription ended");
      conns[index].unacked.push_back(Held{sub.channel, std::move(*r)});
    });
  }

  // Acks a kept Message. Its channel closed: the ack says channel_closed and sends nothing
  // (the broker redelivers); a delivery tag never reaches a newer channel on that number.
  void ack(int a, bool only_dead) {
    Conn* c = conn();
    if (!c) return;
    std::vector<std::size_t> pickable;
    for (std::size_t i = 0; i < c->unacked.size(); ++i)
      if (!only_dead || !c->unacked[i].channel.is_open()) pickable.push_back(i);
    if (pickable.empty()) return;
    const std::size_t i = pickable[static_cast<std::size_t>(a) % pickable.size()];
    Held held = std::move(c->unacked[i]);
    c->unacked.erase(c->unacked.begin() + static_cast<std::ptrdiff_t>(i));
    const bool dead = !held.channel.is_open();
    const std::size_t before = methods_sent();
    auto r = held.message.ack();
    if (!dead) return;
    const std::string what = "ack of delivery " + std::to_string(held.message.delivery_tag()) + " of a closed channel";
    if (r.ok() || r.error().code != make_error_code(errc::channel_closed))
      violation("stale handles: " + what + " did not fail with channel_closed: " + (r.ok() ? std::string("ok") : r.error().to_string()));
    if (methods_sent() != before) violation("stale handles: " + what + " sent the broker a method");
  }

  void get(int a, int b) {
    Conn* c = conn();
    if (!c) return;
    const std::string q = "q" + std::to_string(b % 4);
    const std::size_t index = conns.size() - 1;
    auto t = target(*c, a, "get " + q);
    t.ch.get({.queue = q}, [this, index, t, id = reg(c->scope, "get " + q)](Result<std::optional<client::Message>> r) {
      hit(id);
      refused(t, r);
      if (r && *r) conns[index].unacked.push_back(Held{t.ch, std::move(**r)});
    });
    sent_nothing(t);
  }

  void rpc_start(int a) {
    Conn* c = conn();
    if (!c || c->rpc) return;
    auto t = target(*c, a, "rpc start");
    c->rpc = client::RpcClient::start(t.ch, [this, t, id = reg(c->scope, "rpc start")](Result<void> r) {
      hit(id);
      refused(t, r);
    });
    sent_nothing(t);
  }
  void rpc_call(int a, int b) {
    Conn* c = conn();
    if (!c || !c->rpc) return;
    const std::string text = body();
    // "rpc": the model broker answers at once; "rq": the simulated RpcServer, if one serves;
    // "nobody": unroutable.
    constexpr const char* keys[] = {"rpc", "nobody", "rq"};
    c->rpc->call({.routing_key = keys[a % 3], .timeout = timeouts[b % 4]}, bytes_of(text),
                 [this, id = reg(c->scope, "rpc call " + text)](Result<client::Message>) { hit(id); });
  }

  // An RpcServer on one of the newest connection's channels, answering "rq".
  void rpc_serve(int a) {
    Conn* c = conn();
    if (!c || c->servers.size() >= 2) return;
    auto t = target(*c, a, "rpc serve");
    auto server = client::RpcServer::start(
        // Each answer is a publish of its own, with a key of its own (a redelivered request is
        // answered again): not "re:", the text before a ':' is a publish's key.
        t.ch, "rq", [this](const client::Delivery& d) {
          return "re-" + test::BrokerWorld::key_of(d.body_text()) + "-" + std::to_string(++next_body);
        },
        [this, t, id = reg(c->scope, "rpc serve's ready")](Result<void> r) {
          hit(id);
          refused(t, r);
        });
    sent_nothing(t);
    c->servers.push_back(std::move(server));
  }
  void rpc_server_drop(int a) {
    Conn* c = conn();
    if (!c || c->servers.empty()) return;
    c->servers.erase(c->servers.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(a) % c->servers.size()));
  }
  void drop_rpc() {
    if (Conn* c = conn()) c->rpc.reset();
  }
  // The last reference to the newest connection goes while it lives: every waiter is still
  // told (connection_closed, from the loop), and its handles fail from then on.
  void drop_connection() {
    if (Conn* c = conn()) c->c.reset();
  }

  // ---- exchanges and bindings (x0, x1, x2 of a type b picks; a passive declare of x0-x2)
  void exchange_declare(int a, int b) {
    Conn* c = conn();
    if (!c) return;
    constexpr const char* types[] = {"direct", "fanout", "topic"};
    const std::string name = "x" + std::to_string(b % 3);
    auto t = target(*c, a, "exchange_declare " + name);
    t.ch.exchange_declare({.name = name, .type = types[(b / 3) % 3], .passive = b == 7},
                          [this, t, id = reg(c->scope, "exchange_declare " + name)](Result<void> r) {
                            hit(id);
                            refused(t, r);
                          });
    sent_nothing(t);
  }
  static constexpr const char* binding_keys[] = {"k.a", "k.#", "k.*", "k.b"};
  void queue_bind(int a, int b) {
    Conn* c = conn();
    if (!c) return;
    const std::string exchange = "x" + std::to_string(b % 3), queue = "q" + std::to_string((b / 3) % 3);
    auto t = target(*c, a, "queue_bind " + queue + " to " + exchange);
    t.ch.queue_bind({.queue = queue, .exchange = exchange, .routing_key = binding_keys[b % 4]},
                    [this, t, id = reg(c->scope, "queue_bind " + queue)](Result<void> r) {
                      hit(id);
                      refused(t, r);
                    });
    sent_nothing(t);
  }
  // A publish to x0-x2 (b 7: an exchange that never exists, which closes the channel).
  void publish_exchange(int a, int b) {
    Conn* c = conn();
    if (!c) return;
    constexpr const char* keys[] = {"k.a", "k.b", "k.a.c"};
    const std::string exchange = b == 7 ? "no-such-exchange" : "x" + std::to_string(b % 3);
    publish_tracked(*c, a, {.exchange = exchange, .routing_key = keys[b % 3], .mandatory = b % 2 == 1}, body(),
                    " to " + exchange);
  }
  // channel.flow from the client: RabbitMQ answers active=true and closes the connection
  // (540) for active=false.
  void channel_flow(int a, int b) {
    Conn* c = conn();
    if (!c) return;
    auto t = target(*c, a, "channel.flow");
    t.ch.flow({.active = b % 4 != 3}, [this, t, id = reg(c->scope, "channel.flow")](Result<void> r) {
      hit(id);
      refused(t, r);
    });
    sent_nothing(t);
  }

  void close_connection() {
    Conn* c = conn();
    if (!c) return;
    c->user_closed = true;
    c->c->close([this, id = reg(c->scope, "close", true, true)](Result<void>) { final_report(id); });
  }

  // ---- the Sessions
  // The live (not dropped) session `a` picks, if any.
  SessionState* pick_session(int a) {
    std::vector<SessionState*> live;
    for (auto& st : sessions)
      if (st.s) live.push_back(&st);
    return live.empty() ? nullptr : live[static_cast<std::size_t>(a) % live.size()];
  }
  void session_start() {
    std::size_t live = 0;
    for (auto& st : sessions) live += st.s != nullptr;
    if (live >= 3) return;
    SessionState st;
    st.scope = new_scope("session " + std::to_string(sessions.size() + 1));
    client::SessionOptions o;
    o.client = options();
    o.backoff = client::Backoff{100ms, 2.0, 2000ms};
    o.jitter_seed = 7 + sessions.size();
    // Refused setups (the broker's 404s and 406s) are the simulation's doing: counted, not
    // printed (the default is a line on standard error each).
    o.on_setup_refused = [this](const Error&) { ++setups_refused; };
    auto url = client::parse_url("amqp://guest:guest@fake:5004,fake:5002?heartbeat=1");
    st.s = client::Session::start(driver, *url, o);
    // Its states: none after `closed`, and (through the ledger) none after the session's
    // final report.
    const std::size_t index = sessions.size();
    st.s->on_status = [this, index, id = reg(st.scope, "session on_status", false)](const client::Session::Status& status) {
      hit(id);
      auto& me = sessions[index];
      if (me.status_closed)
        violation("session status: " + scopes[static_cast<std::size_t>(me.scope)].name + " reported state " +
                  std::to_string(static_cast<int>(status.state)) + " after it reported closed");
      if (status.state == client::Session::State::closed) me.status_closed = true;
    };
    sessions.push_back(std::move(st));
  }
  void session_channel(int a) {
    SessionState* st = pick_session(a);
    if (!st || st->closed) return;
    const std::string q = "s" + std::to_string(next_session_queue++ % 3);
    st->rchannels.push_back(st->s->channel([this, q](client::RecoveringChannel& ch, client::Callback<void> done) {
      ch.channel().queue_declare({.name = q}, [this, &ch, q, done](Result<client::QueueDeclared> r) {
        if (!r) return done(r.error());
        ch.channel().consume(
            {.queue = q}, [this](const client::Delivery& d) { session_unacked.push_back(d.take()); },
            [this, done](Result<client::Consumer> c) {
              if (!c) return done(c.error());
              session_consumers.push_back(std::move(*c));
              done(Result<void>());
            });
      });
    }));
  }
  // A plain channel: while the session dials it waits (within the request timeout); a queue
  // declared on it checks the handle works, or fails with its channel's cause.
  void session_open_channel(int a) {
    SessionState* st = pick_session(a);
    if (!st) return;
    const int scope = st->scope;
    st->s->open_channel([this, a, scope, id = reg(scope, "session open_channel")](Result<client::Channel> ch) {
      hit(id);
      if (!ch) return;
      session_plain.push_back(*ch);
      ch->queue_declare({.name = "p" + std::to_string(a % 2)},
                        [this, id2 = reg(scope, "session plain queue_declare")](Result<client::QueueDeclared>) { hit(id2); });
    });
  }
  // A publish on any recovering channel, of a live session or one kept after its session was
  // dropped (which must fail it, once).
  void session_publish(int a, int b) {
    std::vector<std::pair<SessionState*, std::size_t>> all;
    for (auto& st : sessions)
      for (std::size_t k = 0; k < st.rchannels.size(); ++k) all.emplace_back(&st, k);
    if (all.empty()) return;
    auto [st, k] = all[static_cast<std::size_t>(a) % all.size()];
    const std::string text = body();
    const std::string key = test::BrokerWorld::key_of(text);
    st->rchannels[k]->publish({.routing_key = "s" + std::to_string(a % 3), .timeout = timeouts[b % 4]}, bytes_of(text),
                              settled(reg(st->scope, "session publish " + key), key));
  }
  void session_ack(int a) {
    if (session_unacked.empty()) return;
    const std::size_t i = static_cast<std::size_t>(a) % session_unacked.size();
    auto m = std::move(session_unacked[i]);
    session_unacked.erase(session_unacked.begin() + static_cast<std::ptrdiff_t>(i));
    (void)m.ack();
  }
  void close_session(SessionState& st) {
    if (!st.s || st.closed) return;
    st.closed = true;
    st.s->close([this, id = reg(st.scope, "session close", true, true)](Result<void>) { final_report(id); });
  }
  void session_close(int a) {
    if (SessionState* st = pick_session(a)) close_session(*st);
  }
  // The last reference to a session goes, closed or not: everything it was handed is still
  // told. b even: its recovering channels go with it; b odd: the application keeps them.
  void drop_session(int a, int b) {
    SessionState* st = pick_session(a);
    if (!st) return;
    st->s.reset();
    if (b % 2 == 0) st->rchannels.clear();
  }

  // ---- the Pool
  void pool_borrow() {
    if (!pool) {
      pool_scope = new_scope("pool " + std::to_string(++pools));
      pool_closed = false;
      auto url = client::parse_url("amqp://guest:guest@fake:5003?heartbeat=1");
      client::PoolOptions o;
      o.size = 2;
      o.client = options();
      pool = client::Pool::create(driver, *url, o);
    }
    pool->borrow([this, id = reg(pool_scope, "borrow")](Result<client::Lease> lease) {
      hit(id);
      if (lease && !pool_closed) leases.push_back(HeldLease{std::move(*lease), pool_scope});  // once closing, handed straight back
    });
  }
  void pool_release(int a) {
    if (leases.empty()) return;
    leases.erase(leases.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(a) % leases.size()));
  }
  void pool_close_lease(int a) {
    if (leases.empty()) return;
    auto& l = leases[static_cast<std::size_t>(a) % leases.size()];
    l.lease->close([this, id = reg(l.scope, lent_close, true, false)](Result<void>) { hit(id); });
  }
  // The last reference to the pool goes (leases may still be out): waiting borrows and a
  // close in progress are still told. A lent connection outlives the pool, so the close its
  // lessee asks for is the connection's own from then on, no longer ordered before the
  // pool's reports.
  void drop_pool() {
    if (!pool) return;
    pool.reset();
    const int on_their_own = new_scope(scopes[static_cast<std::size_t>(pool_scope)].name + "'s lent connections");
    for (auto& cb : callbacks)
      if (cb.scope == pool_scope && cb.calls == 0 && cb.what == lent_close) cb.scope = on_their_own;
    for (auto& l : leases)
      if (l.scope == pool_scope) l.scope = on_their_own;
  }
  static constexpr const char* lent_close = "a lent connection's close";
  void pool_close() {
    if (!pool || pool_closed) return;
    pool_closed = true;
    pool->close([this, id = reg(pool_scope, "pool close", true, true)](Result<void>) { final_report(id); });
  }

  // ---- faults
  void fault(const Cmd& cmd) {
    const std::uint16_t port = ports_by_fault[cmd.a % 4];
    test::FakeBroker* broker = driver.broker_on(port);
    switch (cmd.op) {
      case Op::cut: driver.cut(port); break;
      case Op::stall: driver.stall(port); break;
      case Op::hold_input: driver.hold_input(port, true); break;
      case Op::release_input: driver.hold_input(port, false); break;
      case Op::split_reads: driver.split_reads(port, static_cast<std::uint64_t>(cmd.b) + 1); break;
      case Op::host_5004: {
        using H = test::FakeDriver::Host;
        constexpr H kinds[] = {H::refuse, H::broker, H::black_hole, H::mute};
        driver.hosts[5004] = kinds[cmd.b % 4];
        break;
      }
      case Op::other_publisher: {
        // Somebody else publishes into one of the queues.
        std::string q = (cmd.b % 2 == 0 ? "q" : "s") + std::to_string(cmd.b % 3);
        if (auto it = world.queues.find(q); it != world.queues.end()) {
          it->second.push_back(test::BrokerWorld::Message{"x" + std::to_string(++next_body), {}, {}, false});
          world.dispatch();
        }
        break;
      }
      default:
        if (!broker) break;
        switch (cmd.op) {
          case Op::broker_close_channel: {
            auto chs = broker->open_channels();
            if (!chs.empty())
              broker->close_channel(chs[static_cast<std::size_t>(cmd.b) % chs.size()], cmd.b % 2 ? 406 : 404,
                                    cmd.b % 2 ? "PRECONDITION_FAILED - inequivalent arg" : "NOT_FOUND - no queue 'gone'");
            break;
          }
          case Op::broker_close_connection:
            broker->close_connection(320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'");
            break;
          case Op::blocked: broker->set_blocked(true); break;
          case Op::unblocked: broker->set_blocked(false); break;
          case Op::silent: broker->go_silent(); break;
          case Op::broker_cancel: {
            auto tags = broker->consumer_tags();
            if (!tags.empty()) broker->cancel_consumer_tag(tags[static_cast<std::size_t>(cmd.b) % tags.size()]);
            break;
          }
          case Op::hold_confirms: broker->hold_confirms(true); break;
          case Op::release_confirms: broker->hold_confirms(false); break;
          case Op::nack_next: broker->nack_next_publish(); break;
          case Op::broker_flow: {
            auto chs = broker->open_channels();
            if (!chs.empty()) broker->send_flow(chs[static_cast<std::size_t>(cmd.b) % chs.size()], cmd.b % 2 == 0);
            break;
          }
          default: break;
        }
    }
  }

  void apply(const Cmd& c) {
    if (off(c.op)) return;
    switch (c.op) {
      case Op::connect: connect(c.b); break;
      case Op::open_channel: open_channel(); break;
      case Op::close_channel: close_channel(c.a); break;
      case Op::declare: declare(c.a, c.b); break;
      case Op::publish: publish(c.a, c.b, false); break;
      case Op::publish_large: publish(c.a, c.b, true); break;
      case Op::publish_no_callback: publish_no_callback(c.a, c.b); break;
      case Op::publish_null_callback: publish_null_callback(c.a, c.b); break;
      case Op::confirm_select: confirm_select(c.a); break;
      case Op::consume: consume(c.a, c.b, false); break;
      case Op::consume_stream: consume(c.a, c.b, true); break;
      case Op::cancel: cancel(c.a); break;
      case Op::receive: receive(c.a); break;
      case Op::ack: ack(c.a, false); break;
      case Op::ack_dead: ack(c.a, true); break;
      case Op::get: get(c.a, c.b); break;
      case Op::rpc_start: rpc_start(c.a); break;
      case Op::rpc_call: rpc_call(c.a, c.b); break;
      case Op::close_connection: close_connection(); break;
      case Op::session_start: session_start(); break;
      case Op::session_channel: session_channel(c.a); break;
      case Op::session_open_channel: session_open_channel(c.a); break;
      case Op::session_publish: session_publish(c.a, c.b); break;
      case Op::session_ack: session_ack(c.a); break;
      case Op::session_close: session_close(c.a); break;
      case Op::pool_borrow: pool_borrow(); break;
      case Op::pool_release: pool_release(c.a); break;
      case Op::pool_close_lease: pool_close_lease(c.a); break;
      case Op::pool_close: pool_close(); break;
      case Op::exchange_declare: exchange_declare(c.a, c.b); break;
      case Op::queue_bind: queue_bind(c.a, c.b); break;
      case Op::publish_exchange: publish_exchange(c.a, c.b); break;
      case Op::channel_flow: channel_flow(c.a, c.b); break;
      case Op::rpc_serve: rpc_serve(c.a); break;
      case Op::rpc_server_drop: rpc_server_drop(c.a); break;
      case Op::drop_connection: drop_connection(); break;
      case Op::drop_rpc: drop_rpc(); break;
      case Op::drop_session: drop_session(c.a, c.b); break;
      case Op::drop_pool: drop_pool(); break;
      case Op::advance: driver.advance(advances[static_cast<std::size_t>(c.a) % 6]); break;
      default: fault(c); break;
    }
    driver.run();
  }

  // ---- invariants
  void check_always() {
    for (const auto& [key, n] : world.received)
      if (n > 1) violation("confirms: the broker received " + key + " " + std::to_string(n) + " times (republished)");
    for (const auto& key : world.stream_rejected)
      violation("deliveries: " + key + ", a delivery of a stream subscription (x-stream-offset), was rejected "
                "(RabbitMQ 3.10-3.12 closes the connection for that)");
    for (const auto& key : world.bounced)
      violation("deliveries: " + key + " went back and forth between broker and client " +
                std::to_string(world.max_deliveries) + " times (the client rejects what it was handed)");
    for (const auto& port : world.heartbeat_missed)
      violation("heartbeats: the broker on port " + port +
                " heard nothing from the client for two heartbeat intervals and dropped the connection");
    world.heartbeat_missed.clear();
    for (const auto& text : world.library_faults)
      violation("protocol: the client library made the broker close a channel: " + text);
    world.library_faults.clear();
    throw_if_violated();
  }
  void throw_if_violated() {
    if (violations.empty()) return;
    std::string text = violations.front();
    violations.clear();
    throw Violation(text);
  }

  void finish() {
    // The broker comes back: what hangs is cut, what is held is let go.
    driver.heal();
    driver.run();
    for (int i = 0; i < 40; ++i) driver.advance(1000ms);
    check_always();
    // The application reads its stream consumers again. A full buffer holds the connection's
    // input, and while it is held only one read per half heartbeat gets through (a piece of
    // a frame when reads are split): what the broker sent arrives once the buffers drain.
    for (int round = 0; round < 200; ++round) {
      bool took = false;
      for (std::size_t index = 0; index < conns.size(); ++index) {
        auto& c = conns[index];
        if (!c.c || !c.c->is_open()) continue;
        for (std::size_t k = 0; k < c.consumers.size(); ++k) {
          auto& sub = c.consumers[k];
          if (!sub.live || !sub.confirmed || !sub.stream || !sub.consumer.active()) continue;
          for (std::size_t n = sub.consumer.buffered(); n > 0; --n) {
            took = true;
            sub.consumer.receive([this, index, k](Result<client::Message> r) {
              if (!r) return;
              auto& sub = conns[index].consumers[k];
              ++received_by_tag[sub.tag];
              if (!sub.auto_ack) conns[index].unacked.push_back(Held{sub.channel, std::move(*r)});
            });
          }
        }
      }
      driver.run();
      if (!took) break;
    }
    check_always();
    // Deliveries to live consumers of ours all reached on_delivery, or a stream consumer's
    // buffer or receive.
    for (auto& c : conns) {
      if (!c.c || !c.c->is_open()) continue;
      for (auto& k : c.consumers) {
        if (!k.live || !k.confirmed || !k.consumer.active()) continue;
        const int seen = received_by_tag[k.tag] + static_cast<int>(k.consumer.buffered());
        if (world.delivered[k.tag] != seen)
          violation("deliveries: the broker delivered " + std::to_string(world.delivered[k.tag]) + " to consumer " + k.tag +
                    ", it " + (k.stream ? "buffered or handed out " : "saw in on_delivery ") + std::to_string(seen));
      }
    }
    for (auto& st : sessions) {
      if (!st.s || st.closed) continue;
      auto& session = st.s;
      const std::string who = scopes[static_cast<std::size_t>(st.scope)].name;
      if (!session->healthy())
        violation("recovery: the broker is back, " + who + " is not healthy (state " +
                  std::to_string(static_cast<int>(session->status().state)) + ", last cause " +
                  (session->status().last_cause ? session->status().last_cause->to_string() : "none") + ")");
      auto& rchannels = st.rchannels;
      for (std::size_t k = 0; k < rchannels.size(); ++k)
        if (session->healthy() && !rchannels[k]->ready())
          violation("recovery: " + who + " is healthy, its recovering channel " + std::to_string(k) + " is not ready");
      // Ready is what it does: a publish on each recovering channel is confirmed.
      std::vector<std::optional<std::string>> outcomes(rchannels.size());
      for (std::size_t k = 0; k < rchannels.size(); ++k) {
        const std::string text = body();
        const std::string key = test::BrokerWorld::key_of(text);
        auto inner = settled(reg(st.scope, "session publish " + key + " (at the end)"), key);
        rchannels[k]->publish({.routing_key = "s" + std::to_string(k % 3), .timeout = 5000ms}, bytes_of(text),
                              [&outcomes, k, inner](Result<engine::PublishOutcome> r) {
                                outcomes[k] = r.ok() && *r == engine::PublishOutcome::confirmed ? "confirmed"
                                              : r.ok() ? "written" : r.error().to_string();
                                inner(std::move(r));
                              });
      }
      for (int i = 0; i < 8; ++i) driver.advance(1000ms);
      for (std::size_t k = 0; k < rchannels.size() && session->healthy(); ++k)
        if (outcomes[k] != "confirmed")
          violation("recovery: " + who + " is healthy, a publish on its recovering channel " + std::to_string(k) +
                    (rchannels[k]->ready() ? " (ready)" : " (not ready)") + " was not confirmed: " +
                    outcomes[k].value_or("no outcome within 8 s"));
    }
    // Every channel.flow the broker sent over a connection still up was answered.
    for (auto* b : world.brokers)
      if (b->unanswered_flows() > 0)
        violation("flow: " + std::to_string(b->unanswered_flows()) + " channel.flow from the broker never answered with flow-ok");
    throw_if_violated();

    // Close everything and wait out every timeout.
    for (auto& c : conns)
      if (c.c && !c.user_closed) {
        c.user_closed = true;
        c.c->close([this, id = reg(c.scope, "close (at the end)", true, true)](Result<void>) { final_report(id); });
      }
    for (auto& st : sessions) close_session(st);
    leases.clear();
    if (pool) pool_close();
    driver.run();
    for (int i = 0; i < 120; ++i) driver.advance(1000ms);
    check_always();
    for (const auto& cb : callbacks)
      if (cb.exactly_once && cb.calls != 1)
        violation("exactly once: " + cb.what + " (" + scopes[static_cast<std::size_t>(cb.scope)].name + ") ran " +
                  std::to_string(cb.calls) + " times, not once, by the end");
    throw_if_violated();
    if (driver.armed_timers() != 0)
      violation("quiet loop: " + std::to_string(driver.armed_timers()) + " timer(s) still armed after everything closed");
    if (driver.posted() != 0) violation("quiet loop: posted work left after everything closed");
    if (driver.open_streams() != 0) {
      std::string ports;
      for (auto p : driver.open_stream_ports()) ports += " " + std::to_string(p);
      violation("quiet loop: stream(s) still open after everything closed, to port(s)" + ports);
    }
    throw_if_violated();
  }
};

Sim::Sim() : impl_(std::make_unique<Impl>(*this)) {}
Sim::~Sim() {
  // The client objects go before the driver whose timers and streams they hold.
  impl_.reset();
}

void Sim::step(const Cmd& c) {
  impl_->apply(c);
  impl_->check_always();
}

void Sim::finish() { impl_->finish(); }

void Sim::run(const std::vector<Cmd>& cmds) {
  for (const auto& c : cmds) step(c);
  finish();
}

}  // namespace warren::sim
