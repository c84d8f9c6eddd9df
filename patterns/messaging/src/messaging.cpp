#include "warren/messaging/messaging.hpp"

#include <algorithm>
#include <cstdio>

#include "names.hpp"
#include "warren/messaging/subscription.hpp"

namespace warren::messaging {
namespace {

class ConnectionSource final : public ChannelSource {
 public:
  explicit ConnectionSource(std::shared_ptr<client::Connection> c) : c_(std::move(c)) {}
  void open_channel(client::Callback<client::Channel> done) override { c_->open_channel(std::move(done)); }
  [[nodiscard]] bool is_open() const override { return c_->is_open(); }
  [[nodiscard]] std::uint32_t frame_max_bytes() const override { return c_->frame_max_bytes(); }
  [[nodiscard]] client::Driver& driver() const override { return c_->driver(); }
  [[nodiscard]] std::optional<client::BrokerVersion> broker_version() const override { return c_->broker_version(); }

 private:
  std::shared_ptr<client::Connection> c_;
};

// A Session's plain channels: open_channel waits for the next connection while it
// reconnects; what the latest connection negotiated stays known meanwhile.
class SessionSource final : public ChannelSource {
 public:
  explicit SessionSource(std::shared_ptr<client::Session> s) : s_(std::move(s)) {}
  void open_channel(client::Callback<client::Channel> done) override { s_->open_channel(std::move(done)); }
  [[nodiscard]] bool is_open() const override { return s_->status().state == client::Session::State::connected; }
  [[nodiscard]] bool recovers() const override { return s_->status().state != client::Session::State::closed; }
  [[nodiscard]] std::uint32_t frame_max_bytes() const override { return s_->frame_max_bytes(); }
  [[nodiscard]] client::Driver& driver() const override { return s_->driver(); }
  [[nodiscard]] std::optional<client::BrokerVersion> broker_version() const override { return s_->broker_version(); }

 private:
  std::shared_ptr<client::Session> s_;
};

}  // namespace

Result<void> check_options(const Options& options) {
  if (!detail::valid_name(options.prefix, 200))
    return make_error(errc::invalid_argument,
                      "prefix '" + options.prefix + "': 1 to 200 of letters, digits, '.', '-', '_', ':'");
  if (options.queue_type != "quorum" && options.queue_type != "classic")
    return make_error(errc::invalid_argument, "queue_type '" + options.queue_type + "': quorum or classic");
  if (options.inbox_ttl.count() <= 0) return make_error(errc::invalid_argument, "inbox_ttl must be positive");
  return {};
}

Result<std::shared_ptr<Messaging>> Messaging::create(std::shared_ptr<client::Connection> connection, Options options) {
  if (!connection) return make_error(errc::invalid_argument, "no connection");
  return create(std::make_unique<ConnectionSource>(std::move(connection)), std::move(options));
}

Result<std::shared_ptr<Messaging>> Messaging::create(std::shared_ptr<client::Session> session, Options options) {
  if (!session) return make_error(errc::invalid_argument, "no session");
  return create(std::make_unique<SessionSource>(std::move(session)), std::move(options));
}

Result<std::shared_ptr<Messaging>> Messaging::create(std::unique_ptr<ChannelSource> source, Options options) {
  if (!source) return make_error(errc::invalid_argument, "no channel source");
  if (auto ok = check_options(options); !ok) return ok.error();
  return std::shared_ptr<Messaging>(new Messaging(std::move(source), std::move(options)));
}

Messaging::Messaging(std::unique_ptr<ChannelSource> source, Options options)
    : source_(std::move(source)),
      options_(std::move(options)),
      random_(options_.random_seed ? *options_.random_seed : std::random_device{}()) {}

Messaging::~Messaging() {
  // Dropped without close(): the channels go with it (the connection stays the caller's).
  for (auto& ch : opened_)
    if (ch.is_open()) ch.close(nullptr);
}

std::string Messaging::name(std::string_view suffix) const {
  std::string n = options_.prefix;
  n += '.';
  n += suffix;
  return n;
}

std::string Messaging::make_uuid() {
  std::uniform_int_distribution<std::uint64_t> any;
  std::uint64_t hi = any(random_), lo = any(random_);
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  char text[37];
  std::snprintf(text, sizeof text, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return text;
}

void Messaging::control_channel(client::Callback<client::Channel> done) {
  if (closed_) return done(make_error(errc::invalid_argument, "the messaging layer is closed"));
  if (control_ && control_->is_open()) return done(*control_);
  control_.reset();  // closed by a channel error: forget it, open another
  control_waiters_.push_back(std::move(done));
  if (control_opening_) return;
  control_opening_ = true;
  std::weak_ptr<Messaging> weak = weak_from_this();
  source_->open_channel([weak](Result<client::Channel> ch) {
    auto self = weak.lock();
    if (!self) return;
    if (!ch) return self->settle_control(ch);
    // Only the channels still open are kept for close(): a control channel that channel
    // errors keep replacing must not grow this list for the life of the layer.
    std::erase_if(self->opened_, [](const client::Channel& c) { return !c.is_open(); });
    self->opened_.push_back(*ch);
    self->prepare_control(*ch);
  });
}

void Messaging::prepare_control(client::Channel ch) {
  std::weak_ptr<Messaging> weak = weak_from_this();
  ch.confirm_select([weak, ch](Result<void> r) {
    auto self = weak.lock();
    if (!self) return;
    if (!r) return self->settle_control(r.error());
    // Exactly two exchanges, however many rooms, addresses and inboxes.
    ch.exchange_declare({.name = self->backplane_exchange(), .type = "direct", .durable = true},
                        [weak, ch](Result<void> r) {
                          auto self = weak.lock();
                          if (!self) return;
                          if (!r) return self->settle_control(r.error());
                          ch.exchange_declare({.name = self->direct_exchange(), .type = "direct", .durable = true},
                                              [weak, ch](Result<void> r) {
                                                auto self = weak.lock();
                                                if (!self) return;
                                                if (!r) return self->settle_control(r.error());
                                                self->settle_control(ch);
                                              });
                        });
  });
}

void Messaging::settle_control(const Result<client::Channel>& r) {
  control_opening_ = false;
  if (r) control_ = *r;
  auto waiters = std::move(control_waiters_);
  control_waiters_.clear();
  for (auto& w : waiters) w(r);
}

void Messaging::consumer_channel(client::Callback<client::Channel> done) {
  if (closed_) return done(make_error(errc::invalid_argument, "the messaging layer is closed"));
  std::weak_ptr<Messaging> weak = weak_from_this();
  source_->open_channel([weak, done = std::move(done)](Result<client::Channel> ch) {
    if (auto self = weak.lock(); self && ch) {
      // Forget channels that are gone, so a long-lived layer does not collect them.
      std::erase_if(self->opened_, [](const client::Channel& c) { return !c.is_open(); });
      self->opened_.push_back(*ch);
    }
    done(std::move(ch));
  });
}

bool Messaging::healthy() const {
  if (closed_ || !source_->is_open()) return false;
  for (const auto& w : subscriptions_)
    if (auto s = w.lock(); s && !s->over() && !s->healthy()) return false;
  return true;
}

void Messaging::track(const std::shared_ptr<Subscription>& subscription) {
  std::erase_if(subscriptions_, [](const std::weak_ptr<Subscription>& w) { return w.expired(); });
  subscriptions_.push_back(subscription);
}

void Messaging::report(Event event) {
  // The same events as records, under names of the one scheme.
  if (options_.observer) {
    if (event.what == "connection") observe("messaging.connection_lost", client::Level::error, event.subject, &event.cause);
    else if (event.what == "consumer.closed") observe("messaging.consumer_closed", client::Level::warning, event.subject, &event.cause);
    else if (event.what == "consumer.recovered") observe("messaging.consumer_recovered", client::Level::info, event.subject);
    else if (event.what == "retry-levels") observe("messaging.retry_levels_failed", client::Level::warning, event.subject, &event.cause);
    else observe("messaging." + event.what, client::Level::info, event.subject, &event.cause);
  }
  if (options_.on_event) options_.on_event(event);
}

void Messaging::connection_lost(const Error& cause) {
  if (connection_reported_) return;
  connection_reported_ = true;
  report({.what = "connection", .subject = "", .cause = cause});
  for (const auto& w : subscriptions_)
    if (auto s = w.lock()) s->end(cause);
}

void Messaging::close(client::Callback<void> done) {
  if (closed_) return source_->driver().post([done] {
      if (done) done(Result<void>());
    });
  closed_ = true;
  for (const auto& w : subscriptions_)
    if (auto s = w.lock()) s->end(make_error(errc::consumer_cancelled, "the messaging layer was closed"));
  subscriptions_.clear();
  auto waiters = std::move(control_waiters_);
  control_waiters_.clear();
  for (auto& w : waiters) w(make_error(errc::invalid_argument, "the messaging layer is closed"));
  auto channels = std::move(opened_);
  opened_.clear();
  control_.reset();
  auto left = std::make_shared<std::size_t>(1);
  auto finish = [left, done] {
    if (--*left == 0 && done) done(Result<void>());
  };
  for (auto& ch : channels) {
    if (!ch.is_open()) continue;
    ++*left;
    ch.close([finish](Result<void>) { finish(); });  // a channel that closed meanwhile is closed all the same
  }
  source_->driver().post(finish);
}

}  // namespace warren::messaging
