#include "warren/pipeline/topology.hpp"

#include <cstdlib>
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
    c.queue_declare({.name = q.name, .durable = q.durable, .auto_delete = q.auto_delete, .passive = passive,
                     .arguments = q.arguments},
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

namespace {

struct DlxProbe {
  std::shared_ptr<client::Connection> conn;
  QueueSpec spec;  // the redeclare: the probe value plus what the 406s taught
  int tries = 0;
  client::Callback<std::optional<std::string>> done;
};

// `text` after `from` up to `to`, or nullopt.
std::optional<std::string> between(const std::string& text, std::string_view from, std::string_view to,
                                   std::size_t* end = nullptr) {
  const auto a = text.find(from);
  if (a == std::string::npos) return std::nullopt;
  const auto b = text.find(to, a + from.size());
  if (b == std::string::npos) return std::nullopt;
  if (end) *end = b + to.size();
  return text.substr(a + from.size(), b - a - from.size());
}

// The queue's own value of an argument, from "... but current is the value '60000' of type
// 'signedint'" (a string, or any integer type: RabbitMQ compares integers by value).
std::optional<wire::FieldValue> current_value(const std::string& text) {
  std::size_t end = 0;
  auto value = between(text, "but current is the value '", "'", &end);
  if (!value) return std::nullopt;
  auto type = between(text.substr(end), " of type '", "'");
  if (!type) return std::nullopt;
  if (*type == "longstr") return wire::FieldValue(*value);
  static constexpr std::string_view ints[] = {"byte", "short", "signedint", "long", "unsignedbyte", "unsignedshort",
                                              "unsignedint"};
  for (auto t : ints)
    if (*type == t) {
      char* stop = nullptr;
      const long long n = std::strtoll(value->c_str(), &stop, 10);
      if (stop == value->c_str() || *stop != '\0') return std::nullopt;
      return wire::FieldValue(static_cast<std::int64_t>(n));
    }
  return std::nullopt;
}

void probe_dead_letter_exchange(const std::shared_ptr<DlxProbe>& p) {
  on_own_channel(p->conn, queue_step(p->spec, false), [p](Result<void> r) {
    const auto* sent = p->spec.arguments.find("x-dead-letter-exchange");
    if (r) return p->done(std::optional<std::string>(std::get<std::string>(sent->value)));
    const Error& e = r.error();
    auto unknown = [&] {
      Error out = e;
      out.detail = "the dead-letter exchange of queue '" + p->spec.name + "': " + e.detail;
      p->done(out);
    };
    if (e.reply_code != 406 || ++p->tries > 6) return unknown();
    const auto arg = between(e.detail, "inequivalent arg '", "'");
    if (!arg) return unknown();
    if (*arg == "x-dead-letter-exchange") {
      if (e.detail.ends_with("but current is none")) return p->done(std::optional<std::string>());
      // "received 'probe' but current is 'X'": the name runs to the text's last quote.
      const auto at = e.detail.find("but current is '");
      if (at == std::string::npos || !e.detail.ends_with("'")) return unknown();
      const auto from = at + std::string_view("but current is '").size();
      return p->done(std::optional<std::string>(e.detail.substr(from, e.detail.size() - 1 - from)));
    }
    if (*arg == "durable" || *arg == "auto_delete") {
      bool& flag = *arg == "durable" ? p->spec.durable : p->spec.auto_delete;
      flag = !flag;
      return probe_dead_letter_exchange(p);
    }
    auto value = current_value(e.detail);
    if (!value) return unknown();
    p->spec.arguments.set(*arg, std::move(*value));
    probe_dead_letter_exchange(p);
  });
}

}  // namespace

void find_dead_letter_exchange(const std::shared_ptr<client::Connection>& connection, const std::string& queue,
                               const std::string& expected, client::Callback<std::optional<std::string>> done) {
  auto p = std::make_shared<DlxProbe>();
  p->conn = connection;
  p->spec = {.name = queue, .durable = true, .arguments = {{"x-dead-letter-exchange", expected}}};
  p->done = std::move(done);
  probe_dead_letter_exchange(p);
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
