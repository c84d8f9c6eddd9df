// The layer simulation's settling applications (see direct_sim.hpp).
#include "sim/direct_sim.hpp"

#include <cstdio>
#include <cstdlib>

#include "warren/client/url.hpp"

namespace warren::layersim {

using namespace std::chrono_literals;

namespace {

const std::string group = "billing", room = "lobby", rpc_queue = "rpc.requests";

}  // namespace

DirectSim::DirectSim(test::FakeDriver& driver, test::BrokerWorld& world, Ledger& ledger, Traces& traces, LayerOf layer_of,
                     std::shared_ptr<client::Observer> observer)
    : driver_(driver), world_(world), ledger_(ledger), traces_(traces), layer_of_(std::move(layer_of)),
      observer_(std::move(observer)) {
  driver_.hosts[rpc_port] = test::FakeDriver::Host::broker;
  driver_.broker_configs[rpc_port] = test::FakeBroker::Config{.world = &world_};
}

DirectSim::~DirectSim() = default;

std::shared_ptr<DirectSim::App> DirectSim::app(std::string who) {
  auto a = std::make_shared<App>();
  a->who = std::move(who);
  apps_.push_back(a);
  return a;
}

// What an application does with a delivery its layer hands it: the layer settles after the
// callback only what the view still holds (message.hpp).
void DirectSim::handed(App& a, const client::Delivery& d) {
  const std::string key(d.body_text());
  ++handed_[key];
  traces_.seen(a.who, key, d.trace());
  switch (a.mode) {
    case keep_copy: {
      auto copy = d.copy();
      if (copy.settles() || !d.settles()) ledger_.violation("settles: a copy took the settle from " + a.who + "'s view");
      if (copy.ack().ok()) ledger_.violation("settles: a copy settled " + key);
      copies_.push_back(std::move(copy));
      if (copies_.size() > 20) copies_.pop_front();
      break;
    }
    case take_later: taken_.push_back(d.take()); break;
    case ack_view: (void)d.ack(); break;
    case nack_once:
      if (nacked_[key]++ == 0) (void)d.nack({.requeue = true});
      break;
    case reject_view:
      if (d.reject({.requeue = false}).ok()) rejected_.insert(key);
      break;
    case take_ack: {
      auto m = d.take();
      (void)m.ack();
      break;
    }
    default: break;
  }
}

void DirectSim::member(int side, int prefetch) {
  if (std::count_if(apps_.begin(), apps_.end(), [](const auto& a) { return a->member && a->live; }) >= 3) return;
  auto a = app("member " + std::to_string(apps_.size()));
  std::weak_ptr<App> weak = a;
  const int cb = ledger_.reg(a->who + " joined");
  messaging::join_group(layer_of_(side), {.address = group, .prefetch = static_cast<std::uint16_t>(prefetch)},
                        [this, weak](const client::Delivery& d) {
                          if (auto a = weak.lock()) handed(*a, d);
                        },
                        [this, cb, a](Result<std::shared_ptr<messaging::Subscription>> r) {
                          ledger_.hit(cb);
                          if (!r) return void(a->live = false);
                          a->member = *r;
                          a->queue = "warren.group." + group;
                        });
}

void DirectSim::inbox(int side) {
  auto& slot = inboxes_[side % 2];
  if (slot) return;
  slot = app("inbox " + std::to_string(side % 2));
  std::weak_ptr<App> weak = slot;
  const int cb = ledger_.reg(slot->who + " opened");
  messaging::open_inbox(layer_of_(side), {.prefetch = 3},
                        [this, weak](const client::Delivery& d) {
                          if (auto a = weak.lock()) handed(*a, d);
                        },
                        [this, cb, a = slot](Result<std::shared_ptr<messaging::Inbox>> r) {
                          ledger_.hit(cb);
                          if (!r) return void(a->live = false);
                          a->inbox = *r;
                          a->queue = a->inbox->address();
                        });
}

void DirectSim::backplane(int side) {
  auto& slot = backplanes_[side % 2];
  if (slot) return;
  slot = app("backplane " + std::to_string(side % 2));
  std::weak_ptr<App> weak = slot;
  const int cb = ledger_.reg(slot->who + " started");
  messaging::Backplane::start(layer_of_(side), {.prefetch = 2},
                              [this, weak](std::string_view, const client::Delivery& d) {
                                if (auto a = weak.lock()) handed(*a, d);
                              },
                              [this, cb, a = slot](Result<std::shared_ptr<messaging::Backplane>> r) {
                                ledger_.hit(cb);
                                if (!r) return void(a->live = false);
                                a->backplane = *r;
                                a->queue = a->backplane->queue();
                                const int joined = ledger_.reg(a->who + " joined " + room);
                                a->backplane->join(room, [this, joined](Result<void>) { ledger_.hit(joined); });
                              });
}

void DirectSim::send(int a, int b) {
  const std::string key = "d" + std::to_string(++next_send_);
  const int target = b % 3;
  const int cb = ledger_.reg("send " + key);
  if (target == 2) {
    const auto& bp = backplanes_[a % 2];
    if (!bp || !bp->backplane) return ledger_.hit(cb);
    traces_.sent(key, std::nullopt);  // the backplane takes no context: spans may start one
    bp->backplane->publish(room, key, [this, cb](Result<void>) { ledger_.hit(cb); });
    return;
  }
  std::string address = group;
  if (target == 1) {
    const auto& in = inboxes_[a % 2];
    if (!in || !in->inbox) return ledger_.hit(cb);
    address = in->inbox->address();
  }
  const auto context = maybe_trace(a / 2);
  traces_.sent(key, context);
  wire::FieldTable headers;
  if (context) add_trace(headers, *context);
  messaging::send(layer_of_(a), {.address = address, .body = key, .headers = headers, .timeout = 5000ms},
                  [this, cb, key, target](Result<void> r) {
                    ledger_.hit(cb);
                    if (r && target == 0) to_group_.insert(key);
                  });
}

void DirectSim::mode(int a, int b) {
  if (apps_.empty()) return;
  apps_[static_cast<std::size_t>(a) % apps_.size()]->mode = b % modes;
}

void DirectSim::settle_taken(int b) {
  if (taken_.empty()) return;
  auto m = std::move(taken_.front());
  taken_.pop_front();
  if (!m.settles()) return ledger_.violation("settles: a taken message does not hold its settle");
  const std::string key(m.body_text());
  switch (b % 3) {
    case 0: (void)m.ack(); break;
    case 1: (void)m.nack({.requeue = true}); break;
    default:
      if (m.reject({.requeue = false}).ok()) rejected_.insert(key);
  }
}

void DirectSim::rpc_serve() {
  if (server_app_) return;
  server_app_ = app("rpc server");
  auto url = client::parse_url("amqp://guest:guest@fake:" + std::to_string(rpc_port));
  const int ready = ledger_.reg("rpc connection");
  client::ClientOptions o;
  o.engine.request_timeout = 2000ms;
  o.observer = observer_;
  rpc_connection_ = client::Connection::connect(driver_, *url, o, [this, ready](Result<void> r) {
    ledger_.hit(ready);
    if (!r) return;
    const int opened = ledger_.reg("rpc channels");
    rpc_connection_->open_channel([this, opened](Result<client::Channel> server_ch) {
      rpc_connection_->open_channel([this, opened, server_ch](Result<client::Channel> client_ch) {
        ledger_.hit(opened);
        if (!server_ch || !client_ch) return;
        server_ch->queue_declare({.name = rpc_queue, .durable = true}, [](Result<client::QueueDeclared>) {});
        server_ch->qos({.prefetch_count = 2}, [](Result<void>) {});
        std::weak_ptr<App> weak = server_app_;
        const int started = ledger_.reg("rpc server ready");
        server_ = client::RpcServer::start(*server_ch, rpc_queue, [this, weak](const client::Delivery& request) {
          if (auto a = weak.lock()) handed(*a, request);
          return "re:" + std::string(request.body_text());
        }, [this, started](Result<void>) { ledger_.hit(started); });
        server_app_->queue = rpc_queue;
        const int client_ready = ledger_.reg("rpc client ready");
        rpc_ = client::RpcClient::start(*client_ch, [this, client_ready](Result<void>) { ledger_.hit(client_ready); });
      });
    });
  });
}

void DirectSim::rpc_call(int a) {
  if (!rpc_) return;
  const std::string key = "c" + std::to_string(++next_call_);
  const auto context = maybe_trace(a);
  traces_.sent(key, context);
  const int cb = ledger_.reg("rpc call " + key);
  rpc_->call({.routing_key = rpc_queue, .timeout = 5000ms, .trace = context.value_or(client::TraceContext{})}, key,
             [this, cb, key](Result<client::Message> reply) {
               ledger_.hit(cb);
               if (!reply) return;
               ++answered_;
               if (reply->body_text() != "re:" + key) ledger_.violation("rpc: " + key + " was answered '" + std::string(reply->body_text()) + "'");
               traces_.seen("rpc reply", key, reply->trace());
             });
}

void DirectSim::check() {}

void DirectSim::finish() {
  for (auto& a : apps_) a->mode = leave;
  while (!taken_.empty()) settle_taken(0);
  if (std::none_of(apps_.begin(), apps_.end(), [](const auto& a) { return a->member && a->live; })) member(0, 1);
  for (int i = 0; i < 40; ++i) {
    driver_.advance(1000ms);
    while (!taken_.empty()) settle_taken(0);
  }
  // Nothing stops at a prefetch: every live subscription's queue is empty and none of its
  // deliveries is held unacked.
  std::set<std::string> queues;
  for (const auto& a : apps_)
    if (a->live && !a->queue.empty()) queues.insert(a->queue);
  for (const auto& q : queues) {
    std::size_t unacked = 0;
    for (auto* b : world_.brokers) unacked += b->unacked_from(q).size();
    const std::size_t ready = world_.queues.contains(q) ? world_.queues[q].size() : 0;
    if (ready || unacked)
      ledger_.violation("stalls: " + q + " holds " + std::to_string(ready) + " ready and " + std::to_string(unacked) +
                        " unacked at the end");
  }
  // Every confirmed send to the group reached a member (rejected ones are gone, by choice).
  for (const auto& key : to_group_)
    if (!handed_.contains(key) && !rejected_.contains(key)) ledger_.violation("stalls: " + key + " never reached a member");
  if (std::getenv("LAYER_SIM_STATS"))
    std::fprintf(stderr, "direct: %zu applications, %d sends (%zu confirmed to the group), %zu handed, %zu rejected, %d calls (%d answered)\n",
                 apps_.size(), next_send_, to_group_.size(), handed_.size(), rejected_.size(), next_call_, answered_);
}

void DirectSim::close() {
  for (auto& a : apps_) {
    if (!a->live) continue;
    a->live = false;
    const int cb = ledger_.reg(a->who + " close");
    auto done = [this, cb](Result<void>) { ledger_.hit(cb); };
    if (a->member) a->member->cancel(done);
    else if (a->inbox) a->inbox->close(done);
    else if (a->backplane) a->backplane->close(done);
    else ledger_.hit(cb);
  }
  server_.reset();
  rpc_.reset();
  if (rpc_connection_) {
    const int cb = ledger_.reg("rpc connection close");
    rpc_connection_->close([this, cb](Result<void>) { ledger_.hit(cb); });
  }
}

}  // namespace warren::layersim
