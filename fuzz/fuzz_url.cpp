// Rule: parse_url never quotes the credentials. The URL is "amqp://" + the input (amqps://
// when the first byte is odd); everything before its last '@' is the userinfo. Rewriting every
// byte of the userinfo that does not shape the parse (all but '%', ':', '@', '/', '?', '#',
// and hex digits stay hex digits) must leave the outcome the same: the same error text, or
// the same hosts, vhost and parameters. An error that held any of those bytes would differ.
// Also: every refusal says why, and what parses writes back (redacted) to text that parses
// to the same user, hosts and vhost.
#include <cstdlib>
#include <string>
#include <string_view>

#include "warren/client/url.hpp"

namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Every byte changed unless it shapes the parse; a hex digit stays one so that "%4x" stays
// valid or invalid as it was.
std::string rewritten(std::string_view userinfo) {
  std::string out(userinfo);
  for (char& c : out) {
    if (c == '%' || c == ':' || c == '@' || c == '/' || c == '?' || c == '#') continue;
    if (is_hex(c)) c = c == '7' ? '8' : '7';
    else c = c == 'x' ? 'y' : 'x';
  }
  return out;
}

bool same_outcome(const warren::client::ConnectionUrl& a, const warren::client::ConnectionUrl& b) {
  return a.tls == b.tls && a.endpoints == b.endpoints && a.vhost == b.vhost && a.heartbeat_s == b.heartbeat_s &&
         a.connection_timeout == b.connection_timeout && a.channel_max == b.channel_max &&
         a.frame_max_bytes == b.frame_max_bytes && a.auth_mechanism == b.auth_mechanism &&
         a.server_name_indication == b.server_name_indication && a.user.size() == b.user.size() &&
         a.password.size() == b.password.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using warren::client::parse_url;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string scheme = "amqp://";
  if (!text.empty() && (text.front() & 1)) scheme = "amqps://";
  if (!text.empty()) text.remove_prefix(1);

  const auto url = parse_url(scheme + std::string(text));
  if (!url.ok() && url.error().detail.empty()) std::abort();  // every refusal says why
  if (url.ok()) {
    const auto again = parse_url(url->redacted());
    if (!again.ok() || again->tls != url->tls || again->endpoints != url->endpoints || again->vhost != url->vhost ||
        again->user != url->user)
      std::abort();
  }

  const auto at = text.rfind('@');
  if (at == std::string_view::npos) return 0;  // no credentials
  const auto other = parse_url(scheme + rewritten(text.substr(0, at)) + std::string(text.substr(at)));
  if (url.ok() != other.ok()) std::abort();
  if (!url.ok() && url.error().to_string() != other.error().to_string()) std::abort();
  if (url.ok() && !same_outcome(*url, *other)) std::abort();
  return 0;
}
