#include "password_file.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "small_file.hpp"

namespace warren::cli {
namespace {

constexpr std::size_t max_password_file_bytes = 64 * 1024;

Error unavailable(const std::string& path, std::string why) {
  return make_error(errc::credentials_unavailable, "--password-file " + path + ": " + std::move(why));
}

// base64url without padding (RFC 7515's JWT parts); nothing if a character is outside it.
std::optional<std::string> base64url_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  std::uint32_t bits = 0;
  int held = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    held += 6;
    if (held >= 8) {
      held -= 8;
      out.push_back(static_cast<char>((bits >> held) & 0xFF));
    }
  }
  return out;
}

}  // namespace

Result<std::string> read_password_file(const std::string& path) {
  SmallFile file = read_small_file(path, max_password_file_bytes);
  if (file.error == EISDIR) return unavailable(path, "a directory, not a file");
  if (file.error) return unavailable(path, std::string("cannot read it: ") + std::strerror(file.error));
  if (file.too_large) return unavailable(path, "larger than 64 KiB, not a secret");
  std::string& text = file.text;
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) return unavailable(path, "empty");
  return std::move(text);
}

std::optional<std::int64_t> jwt_expiry(std::string_view token) {
  const auto first = token.find('.');
  if (first == std::string_view::npos) return std::nullopt;
  const auto second = token.find('.', first + 1);
  if (second == std::string_view::npos || token.find('.', second + 1) != std::string_view::npos) return std::nullopt;
  const auto payload = base64url_decode(token.substr(first + 1, second - first - 1));
  if (!payload) return std::nullopt;
  const auto claims = nlohmann::json::parse(*payload, nullptr, /*allow_exceptions=*/false);
  if (!claims.is_object()) return std::nullopt;
  const auto exp = claims.find("exp");
  if (exp == claims.end() || !exp->is_number()) return std::nullopt;
  return exp->get<std::int64_t>();
}

void PasswordFile::fetch(client::Callback<client::Credentials> done) {
  auto secret = read_password_file(path_);
  if (!secret) return done(secret.error());
  client::Credentials c;
  if (const auto exp = jwt_expiry(*secret)) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    // One that has expired already is handed over as it is: the broker's refusal says so.
    c.expires_in = std::chrono::seconds(*exp > now ? *exp - now : 0);
  }
  last_ = *secret;
  c.secret = std::move(*secret);
  done(std::move(c));
}

Result<std::optional<std::string>> PasswordFile::changed_secret() {
  auto secret = read_password_file(path_);
  if (!secret) return secret.error();
  if (*secret == last_) return std::optional<std::string>();
  last_ = *secret;
  return std::optional<std::string>(std::move(*secret));
}

}  // namespace warren::cli
