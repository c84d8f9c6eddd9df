// Connection URLs as RabbitMQ's URI specification reads them, plus warren's form for several
// hosts. A parameter is honoured or refused: one warren cannot honour exactly as written is an
// error that names it, never silently dropped. Pure parsing: no sockets, no files.
//
//   amqp[s]://[user[:password]@]host[:port][,host[:port]...][/vhost][?key=value&...]
//
// - The credentials end at the last '@': a password may hold any character raw ('/', '?',
//   '#', '@' included) or percent-encoded; a '@' in the vhost or a parameter is written %40,
//   and a raw '/', '?' or '#' in the user name is refused (it means the '@' came later).
// - No error text holds any part of the user name or password, nor of a host or port (a URL
//   missing its '@' has its credentials there): those are named by their place.
// - No path means the vhost "/"; "/" alone means the empty vhost; "/%2f" names "/".
// - Several hosts, separated by commas, are tried in order (IPv6 literals in brackets).
// - Honoured: heartbeat (s), connection_timeout (ms), channel_max, frame_max,
//   auth_mechanism (plain, amqplain, external), and for amqps server_name_indication
//   (a host name) and verify=verify_peer (what warren always does).
// - Refused: cacertfile, certfile, keyfile (a URL may not make the process read a file:
//   give PEM text in the options), verify=verify_none (not offered), a TLS parameter on
//   amqp://, a repeated parameter, and any unknown or misspelt one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warren/engine/options.hpp"
#include "warren/result.hpp"

namespace warren::client {

struct Endpoint {
  std::string host{};
  std::uint16_t port = 5672;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

struct ConnectionUrl {
  bool tls = false;
  std::vector<Endpoint> endpoints{};  // at least one, tried in order
  std::string user = "guest";
  std::string password = "guest";   // never printed: see redacted()
  std::string vhost = "/";
  std::optional<std::uint16_t> heartbeat_s{};
  std::optional<engine::Duration> connection_timeout{};
  std::optional<std::uint16_t> channel_max{};
  std::optional<std::uint32_t> frame_max_bytes{};
  std::optional<engine::Mechanism> auth_mechanism{};
  std::optional<std::string> server_name_indication{};  // amqps: the name sent and verified

  // The engine options this URL asks for, over `base` (what the URL does not say stays).
  [[nodiscard]] engine::ConnectionOptions apply(engine::ConnectionOptions base) const;
  // The URL without its password (the user name stays), percent-encoded so that it parses
  // back to the same user, hosts and vhost.
  [[nodiscard]] std::string redacted() const;
};

[[nodiscard]] Result<ConnectionUrl> parse_url(std::string_view url);

}  // namespace warren::client
