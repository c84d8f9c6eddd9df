// --password-file PATH: the secret (a password, or an OAuth 2 access token) read from a file,
// the shape a mounted Kubernetes secret or a token agent's sidecar rotates. It is read before
// each dial (a reconnect takes what the file holds then), and a long-running command checks it
// every few seconds: when the file's content changed, every open connection hands the broker
// the new secret in place (connection.update-secret). A JWT's `exp` claim, if the secret is
// one, tells the client when it expires, so it is re-read ahead of that too. docs/warren-cli.md,
// "Credentials".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "warren/client/credentials.hpp"

namespace warren::cli {

// The file's whole content is the secret, less one line end ("\n" or "\r\n"): an editor's or
// echo's. Empty, unreadable, a directory or over 64 KiB: an error naming the path, never the
// content.
[[nodiscard]] Result<std::string> read_password_file(const std::string& path);

// A JWT's `exp` claim (seconds since the epoch), if `token` is a JWT (three base64url parts,
// the middle one a JSON object) that has a numeric one.
[[nodiscard]] std::optional<std::int64_t> jwt_expiry(std::string_view token);

class PasswordFile final : public client::CredentialsProvider {
 public:
  explicit PasswordFile(std::string path) : path_(std::move(path)) {}
  // Reads the file now; with a JWT's exp, how long it has left by the system clock.
  void fetch(client::Callback<client::Credentials> done) override;
  // Reads the file; the secret if it differs from the last one read (fetch or here), nothing if
  // it is the same, the error if it cannot be read.
  [[nodiscard]] Result<std::optional<std::string>> changed_secret();
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::string last_;  // what was read last; compared, never printed
};

}  // namespace warren::cli
