#include "warren/pipeline/topology.hpp"

#include <functional>

namespace warren::pipeline {
namespace {

// One step on a fresh channel: `run(channel, answer)` does the verb; the channel is closed
// afterwards if it is still open. A channel error closes only that channel.
using Answer = std::function<void(Result<void>)>;
using Step = std::function<void(const client::Channel&, Answer)>;

void on_own_channel(const std::shared_ptr<client::Connection>& conn, Step step, Answer done) {
  conn->open_channel([step = std::move(step), done = std::move(done)](Result<client::Channel> ch) {
    if (!ch) return done(ch.error());
    client::Channel c = *ch;
    step(c, [c, done](Result<void> r) {
      if (c.is_open()) c.close([](Result<void>) {});
      done(std::move(r));
    });
  });
}

Step exchange_step(const ExchangeSpec& e, bool passive) {
  return [e, passive](const client::Channel& c, Answer answer) {
    c.exchange_declare({.name = e.name, .type = e.type, .durable = e.durable, .passive = passive, .arguments = e.arguments},
                       std::move(answer));
  };
}

Step queue_step(const QueueSpec& q, bool passive) {
  return [q, passive](const client::Channel& c, Answer answer) {
    c.queue_declare({.name = q.name, .durable = q.durable, .passive = passive, .arguments = q.arguments},
                    [answer = std::move(answer)](Result<client::QueueDeclared> r) {
                      if (!r) return answer(r.error());
                      answer({});
                    });
  };
}

struct Named {
  std::string what;  // "exchange 'x'"
  Step passive, full;
};

std::vector<Named> objects(const Topology& t) {
  std::vector<Named> out;
  for (const auto& e : t.exchanges)
    out.push_back({"exchange '" + e.name + "'", exchange_step(e, true), exchange_step(e, false)});
  for (const auto& q : t.queues) out.push_back({"queue '" + q.name + "'", queue_step(q, true), queue_step(q, false)});
  return out;
}

struct Verify {
  std::shared_ptr<client::Connection> conn;
  std::vector<Named> objects;
  std::size_t next = 0;
  std::string missing, mismatched;
  bool compare_settings = true;
  client::Callback<void> done;
};

void verify_next(const std::shared_ptr<Verify>& v) {
  if (v->next == v->objects.size()) {
    if (v->missing.empty() && v->mismatched.empty()) return v->done({});
    std::string text = "topology: ";
    if (!v->missing.empty()) text += "missing " + v->missing;
    if (!v->mismatched.empty()) text += (v->missing.empty() ? "" : "; ") + std::string("mismatched ") + v->mismatched;
    return v->done(make_error(v->missing.empty() ? errc::precondition_failed : errc::not_found, text));
  }
  const Named& o = v->objects[v->next++];
  on_own_channel(v->conn, o.passive, [v, &o](Result<void> exists) {
    auto add = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
    if (!exists) {
      if (exists.error().reply_code == 404) add(v->missing, o.what);
      else add(v->mismatched, o.what + " (" + exists.error().to_string() + ")");
      return verify_next(v);
    }
    if (!v->compare_settings) return verify_next(v);
    on_own_channel(v->conn, o.full, [v, &o, add](Result<void> same) {
      if (!same) add(v->mismatched, o.what + " (" + same.error().to_string() + ")");
      verify_next(v);
    });
  });
}

}  // namespace

namespace {

struct Declare {
  std::shared_ptr<client::Connection> conn;
  std::vector<std::pair<std::string, Step>> steps;
  std::size_t next = 0;
  client::Callback<void> done;
};

void declare_next(const std::shared_ptr<Declare>& d) {
  if (d->next == d->steps.size()) return d->done({});
  const auto& step = d->steps[d->next++];
  on_own_channel(d->conn, step.second, [d, &step](Result<void> r) {
    if (!r) {
      Error e = r.error();
      e.detail = "declare " + step.first + (e.detail.empty() ? "" : ": " + e.detail);
      return d->done(e);
    }
    declare_next(d);
  });
}

}  // namespace

void declare_topology(const std::shared_ptr<client::Connection>& connection, const Topology& topology,
                      client::Callback<void> done) {
  auto d = std::make_shared<Declare>();
  d->conn = connection;
  for (auto& o : objects(topology)) d->steps.emplace_back(o.what, o.full);
  for (const auto& b : topology.bindings)
    d->steps.emplace_back("binding of queue '" + b.queue + "' to exchange '" + b.exchange + "'",
                          [b](const client::Channel& c, Answer answer) {
                            c.queue_bind({.queue = b.queue, .exchange = b.exchange, .routing_key = b.routing_key},
                                         std::move(answer));
                          });
  d->done = std::move(done);
  declare_next(d);
}

void verify_topology(const std::shared_ptr<client::Connection>& connection, const Topology& topology,
                     VerifyOptions options, client::Callback<void> done) {
  auto v = std::make_shared<Verify>();
  v->compare_settings = options.compare_settings;
  v->conn = connection;
  v->objects = objects(topology);
  v->done = std::move(done);
  verify_next(v);
}

}  // namespace warren::pipeline
