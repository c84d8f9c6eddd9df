#include "warren/client/url.hpp"

#include <charconv>
#include <set>

namespace warren::client {
namespace {

Error bad(std::string detail) { return make_error(errc::invalid_url, std::move(detail)); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding; `what` names the part for the error.
Result<std::string> decode(std::string_view s, std::string_view what) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int hi = i + 1 < s.size() ? hex_value(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) return bad("bad percent-encoding in " + std::string(what));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

template <class T>
Result<T> number(std::string_view text, std::string_view name, std::uint64_t max) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || v > max)
    return bad(std::string(name) + "=" + std::string(text) + " is not a whole number from 0 to " + std::to_string(max));
  return static_cast<T>(v);
}

// One host of the list. Its errors name it by its place, not by its text: a URL whose '@' is
// missing has its credentials there ("amqp://admin:S3cret" is host "admin", port "S3cret").
Result<Endpoint> endpoint(std::string_view text, std::uint16_t default_port, std::size_t index) {
  const std::string which = "host " + std::to_string(index);
  Endpoint e;
  e.port = default_port;
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {  // [IPv6]:port
    auto close = text.find(']');
    if (close == std::string_view::npos) return bad(which + " has an unclosed '['");
    host = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad(which + " has text after ']' that is not :PORT");
      port = rest.substr(1);
    }
  } else if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto decoded = decode(host, which);
  if (!decoded.ok()) return std::move(decoded).error();
  e.host = decoded->empty() ? "localhost" : std::move(*decoded);
  if (!port.empty()) {
    auto p = number<std::uint16_t>(port, "port", 65535);
    if (!p.ok() || *p == 0) return bad("the port of " + which + " is not a number from 1 to 65535");
    e.port = *p;
  }
  return e;
}

// user[:password], percent-decoded. No error quotes either. A raw '/', '?' or '#' in the user
// name means the '@' after it belongs to the vhost or a parameter ("amqp://h/v@x" is not the
// user "h/v" logging in to x): refused rather than guessed.
Result<void> read_credentials(std::string_view userinfo, ConnectionUrl& u) {
  const auto colon = userinfo.find(':');
  const auto user_text = userinfo.substr(0, colon);
  if (user_text.find_first_of("/?#") != std::string_view::npos)
    return bad("the user name holds a raw '/', '?' or '#': write it %2F, %3F or %23 (and a '@' in the vhost or a "
               "parameter as %40)");
  auto user = decode(user_text, "the user name");
  if (!user.ok()) return std::move(user).error();
  u.user = std::move(*user);
  if (colon == std::string_view::npos) {
    u.password.clear();
    return {};
  }
  auto password = decode(userinfo.substr(colon + 1), "the password");
  if (!password.ok()) return std::move(password).error();
  u.password = std::move(*password);
  return {};
}

// Percent-encodes all but RFC 3986's unreserved characters and `keep`, so that what
// redacted() writes parses back to the same parts.
void append_encoded(std::string& out, std::string_view text, std::string_view keep = {}) {
  const char* digits = "0123456789abcdef";
  for (char c : text) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_' || c == '~';
    if (unreserved || keep.find(c) != std::string_view::npos) {
      out += c;
      continue;
    }
    out += '%';
    out += digits[(static_cast<unsigned char>(c) >> 4) & 15];
    out += digits[static_cast<unsigned char>(c) & 15];
  }
}

}  // namespace

Result<ConnectionUrl> parse_url(std::string_view url) {
  ConnectionUrl u;
  std::string_view rest;
  if (url.rfind("amqp://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("amqps://", 0) == 0) {
    u.tls = true;
    rest = url.substr(8);
  } else {
    return bad("a URL starts with amqp:// or amqps://");
  }
  // The credentials end at the last '@', before or after any '/', '?' or '#': a generated
  // password holds them raw, and splitting it there once printed its pieces as a port or a
  // parameter. So a '@' after the host (in the vhost or a parameter) is written %40.
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    if (auto read = read_credentials(rest.substr(0, at), u); !read.ok()) return std::move(read).error();
    rest = rest.substr(at + 1);
  }
  if (rest.find('#') != std::string_view::npos) return bad("a URL has no fragment (#...)");
  const std::uint16_t default_port = u.tls ? 5671 : 5672;

  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::optional<std::string_view> path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  // host[:port][,host[:port]...]
  while (true) {
    auto comma = rest.find(',');
    auto e = endpoint(rest.substr(0, comma), default_port, u.endpoints.size() + 1);
    if (!e.ok()) return std::move(e).error();
    u.endpoints.push_back(std::move(*e));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (path) {
    if (path->find('/') != std::string_view::npos)
      return bad("the vhost \"" + std::string(*path) + "\" holds a '/': write it as %2f");
    auto vhost = decode(*path, "the vhost");
    if (!vhost.ok()) return std::move(vhost).error();
    u.vhost = std::move(*vhost);
  }

  std::set<std::string> seen;
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    auto key_r = decode(pair.substr(0, eq), "the query");
    auto value_r = decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1), "the query");
    if (!key_r.ok()) return std::move(key_r).error();
    if (!value_r.ok()) return std::move(value_r).error();
    const std::string& key = *key_r;
    const std::string& value = *value_r;
    if (!seen.insert(key).second) return bad("parameter " + key + " is given twice");
    auto tls_only = [&]() -> std::optional<Error> {
      if (!u.tls) return bad("parameter " + key + " is for amqps:// URLs only");
      return std::nullopt;
    };
    if (key == "heartbeat") {
      auto v = number<std::uint16_t>(value, key, 65535);
      if (!v.ok()) return std::move(v).error();
      u.heartbeat_s = *v;
    } else if (key == "connection_timeout") {
      auto v = number<std::uint32_t>(value, key, 0xFFFFFFFFu);
      if (!v.ok()) return std::move(v).error();
      u.connection_timeout = engine::Duration{*v};
    } else if (key == "channel_max") {
      auto v = number<std::uint16_t>(value, key, 65535);
      if (!v.ok()) return std::move(v).error();
      u.channel_max = *v;
    } else if (key == "frame_max") {
      auto v = number<std::uint32_t>(value, key, 0xFFFFFFFFu);
      if (!v.ok()) return std::move(v).error();
      if (*v != 0 && *v < 4096) return bad("frame_max=" + value + " is below the minimum 4096");
      u.frame_max_bytes = *v;
    } else if (key == "auth_mechanism") {
      std::string lower;
      for (char c : value) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      if (lower == "plain") u.auth_mechanism = engine::Mechanism::plain;
      else if (lower == "amqplain") u.auth_mechanism = engine::Mechanism::amqplain;
      else if (lower == "external") u.auth_mechanism = engine::Mechanism::external;
      else return bad("auth_mechanism=" + value + " is not plain, amqplain or external");
    } else if (key == "server_name_indication") {
      if (auto e = tls_only()) return *e;
      if (value.empty() || value == "disable")
        return bad("server_name_indication=" + value + " would send no host name; warren always verifies one");
      u.server_name_indication = value;
    } else if (key == "verify") {
      if (auto e = tls_only()) return *e;
      if (value != "verify_peer")
        return bad("verify=" + value + " is not offered: warren always verifies the broker's certificate and name");
    } else if (key == "cacertfile" || key == "certfile" || key == "keyfile") {
      return bad("parameter " + key + " names a file, and a URL may not make the process read one: "
                 "give the PEM text in the connection options");
    } else {
      return bad("unknown parameter " + key + " (warren honours heartbeat, connection_timeout, channel_max, "
                 "frame_max, auth_mechanism, server_name_indication, verify)");
    }
  }
  return u;
}

engine::ConnectionOptions ConnectionUrl::apply(engine::ConnectionOptions base) const {
  base.user = user;
  base.password = password;
  base.vhost = vhost;
  if (heartbeat_s) base.heartbeat_s = *heartbeat_s;
  if (channel_max) base.channel_max = *channel_max;
  if (frame_max_bytes) base.frame_max_bytes = *frame_max_bytes;
  if (auth_mechanism) base.mechanism = *auth_mechanism;
  return base;
}

std::string ConnectionUrl::redacted() const {
  std::string out = tls ? "amqps://" : "amqp://";
  append_encoded(out, user);
  out += ":****@";
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    if (i) out += ',';
    if (endpoints[i].host.find(':') != std::string::npos) {  // IPv6, in brackets
      out += '[';
      append_encoded(out, endpoints[i].host, ":");
      out += ']';
    } else {
      append_encoded(out, endpoints[i].host);
    }
    out += ':';
    out += std::to_string(endpoints[i].port);
  }
  out += '/';
  append_encoded(out, vhost);
  return out;
}

}  // namespace warren::client
