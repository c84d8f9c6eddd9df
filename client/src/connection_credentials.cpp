// A connection's credentials that expire (credentials.hpp): the provider asked before the dial,
// the secret refreshed in place (connection.update-secret) ahead of its expiry, a failed fetch
// retried with backoff. No record ever carries the secret.
#include <algorithm>

#include "warren/client/connection.hpp"

namespace warren::client {

namespace {

class FunctionProvider final : public CredentialsProvider {
 public:
  explicit FunctionProvider(std::function<void(Callback<Credentials>)> fetch) : fetch_(std::move(fetch)) {}
  void fetch(Callback<Credentials> done) override { fetch_(std::move(done)); }

 private:
  std::function<void(Callback<Credentials>)> fetch_;
};

std::string ms(engine::Duration d) { return std::to_string(d.count()) + " ms"; }

// One code for every provider failure (Session retries it: the provider may answer next time),
// the provider's own words after it.
Error provider_failed(const Error& e) {
  if (e.code == make_error_code(errc::credentials_unavailable)) return e;
  return make_error(errc::credentials_unavailable, "the credentials provider failed: " + e.to_string());
}

}  // namespace

std::shared_ptr<CredentialsProvider> credentials_from(std::function<void(Callback<Credentials>)> fetch) {
  return std::make_shared<FunctionProvider>(std::move(fetch));
}

void Connection::fetch_credentials_then_dial() {
  std::weak_ptr<Connection> self = weak_from_this();
  // Asked once per connect: the hosts of a multi-host URL are dialled with the same secret.
  options_.credentials->fetch([self](Result<Credentials> got) {
    auto c = self.lock();
    if (!c || c->close_asked_ || c->closed_reported_) return;
    if (!got.ok()) {
      const Error cause = provider_failed(got.error());
      c->observe("credentials.fetch_failed", Level::error, 0, &cause);
      // Never inside connect() itself (a provider may answer at once): the caller holds the
      // connection before on_ready runs.
      c->later([self, cause] {
        if (auto c = self.lock(); c && !c->closed_reported_) c->finish(cause);
      });
      return;
    }
    if (!got->user.empty()) c->options_.engine.user = got->user;
    c->options_.engine.password = std::move(got->secret);
    c->secret_expires_in_ = got->expires_in;
    c->secret_fetched_at_ = c->driver_.now();
    c->observe("credentials.fetched", Level::info, 0, nullptr,
               got->expires_in ? "expires in " + ms(*got->expires_in) : "no expiry");
    c->dial_next();
  });
}

void Connection::schedule_refresh_of_secret(engine::Duration at_least) {
  if (!secret_expires_in_) return;  // it does not expire: nothing to refresh
  const auto lived = std::chrono::duration_cast<engine::Duration>(driver_.now() - secret_fetched_at_);
  const engine::Duration due = refresh_after(*secret_expires_in_);
  schedule_refresh(std::max(due > lived ? due - lived : engine::Duration::zero(), at_least));
}

void Connection::schedule_refresh(engine::Duration after) {
  std::weak_ptr<Connection> self = weak_from_this();
  if (!refresh_timer_)
    refresh_timer_ = driver_.timer([self] {
      if (auto c = self.lock()) c->refresh_credentials();
    });
  refresh_timer_->arm(driver_.now() + after);
}

void Connection::refresh_credentials() {
  if (refreshing_ || closed_reported_ || close_asked_ || !engine_ || !engine_->is_open()) return;
  // A broker that blocked the connection (a memory or disk alarm) reads nothing once a publish
  // came: an update-secret would wait there and its deadline end the connection. Later.
  if (engine_->is_blocked()) return schedule_refresh(engine::Duration{1000});
  refreshing_ = true;
  std::weak_ptr<Connection> self = weak_from_this();
  options_.credentials->fetch([self](Result<Credentials> got) {
    auto c = self.lock();
    if (!c) return;
    if (c->closed_reported_ || c->close_asked_) {
      c->refreshing_ = false;
      return;
    }
    if (!got.ok()) {
      c->refreshing_ = false;
      ++c->refresh_attempts_;
      const engine::Duration wait = refresh_retry_after(c->refresh_attempts_);
      const Error cause = provider_failed(got.error());
      c->observe("credentials.refresh_failed", Level::warning, 0, &cause,
                 "attempt " + std::to_string(c->refresh_attempts_) + ", again in " + ms(wait));
      c->schedule_refresh(wait);
      return;
    }
    const std::optional<engine::Duration> expires_in = got->expires_in;
    const engine::Instant fetched_at = c->driver_.now();
    std::string secret = std::move(got->secret);
    c->update_secret(secret, "the secret neared its expiry", [self, secret, expires_in, fetched_at](Result<void> r) {
      auto c = self.lock();
      if (!c) return;
      c->refreshing_ = false;
      if (!r.ok()) return;  // refused: the broker closed the connection (credentials.refused said so)
      // A redial of this connection's remaining hosts, should there be one, uses it too.
      c->options_.engine.password = secret;
      c->secret_expires_in_ = expires_in;
      c->secret_fetched_at_ = fetched_at;
      c->refresh_attempts_ = 0;
      // At least a second apart: a provider that hands back the same token near its expiry
      // (a file its agent has not rotated yet) is asked again soon, but not in a loop.
      c->schedule_refresh_of_secret(engine::Duration{1000});
    });
  });
}

}  // namespace warren::client
