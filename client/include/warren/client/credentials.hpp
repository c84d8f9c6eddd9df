// Credentials that expire: an OAuth 2 access token as the password (RabbitMQ's
// rabbitmq_auth_backend_oauth2), a vault's short-lived password. The application hands warren
// a provider; warren asks it before every dial (so a reconnect never logs in with a token that
// has expired), and while the connection is open it fetches a fresh secret ahead of the old
// one's expiry and hands it to the broker in place (connection.update-secret): nothing is
// reconnected, no channel or consumer is disturbed.
//
//   options.credentials = client::credentials_from([&](client::Callback<client::Credentials> done) {
//     tokens.fetch([done](Token t) { done(client::Credentials{.secret = t.jwt, .expires_in = t.lifetime}); });
//   });
//
// When: at two thirds of the remaining life the provider reported (a token good for 60 min is
// refreshed after 40): the last third is left for retries (a token service that is down for a
// while, a slow answer), with backoff from 1 s doubling to 30 s, while the old token still
// works. A secret without `expires_in` is never refreshed by warren (Connection::update_secret
// does it on the application's schedule).
//
// What is said, as observer records (never the secret): credentials.fetched (before a dial),
// credentials.refreshed (the broker took the new secret), credentials.refresh_failed (the
// provider failed; retried), credentials.refused (the broker refused the new secret: it closes
// the connection, which then ends with that cause, or a Session reconnects with a fresh fetch).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "warren/client/options.hpp"
#include "warren/engine/types.hpp"

namespace warren::client {

struct Credentials {
  std::string user{};    // empty: the URL's user (or ClientOptions::engine.user)
  std::string secret{};  // the password or token; never logged, never printed
  // How long it stays valid from when it is handed over. Unset: it does not expire (no refresh).
  std::optional<engine::Duration> expires_in{};
};

class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  // Called on the connection's loop thread; `done` is called once, on that thread (from another
  // thread, hand it over with Driver::post), now or later. An error fails the dial it was asked
  // for (a refresh is retried instead).
  virtual void fetch(Callback<Credentials> done) = 0;
};

// A provider from a function with fetch's signature.
[[nodiscard]] std::shared_ptr<CredentialsProvider> credentials_from(std::function<void(Callback<Credentials>)> fetch);

// When to refresh a secret valid for `expires_in` from now: at two thirds of it.
[[nodiscard]] constexpr engine::Duration refresh_after(engine::Duration expires_in) noexcept {
  return expires_in * 2 / 3;
}
// The wait before retry `attempt` (1, 2, ...) of a refresh whose fetch failed: 1 s, doubling, at
// most 30 s.
[[nodiscard]] constexpr engine::Duration refresh_retry_after(unsigned attempt) noexcept {
  engine::Duration d{1000};
  for (unsigned i = 1; i < attempt && d < engine::Duration{30000}; ++i) d *= 2;
  return d < engine::Duration{30000} ? d : engine::Duration{30000};
}

}  // namespace warren::client
