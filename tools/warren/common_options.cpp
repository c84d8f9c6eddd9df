#include "commands.hpp"

namespace warren::cli {

void add_common_options(CLI::App& command, Common& common) {
  auto* url = command
                  .add_option("--url", common.urls,
                              "amqp[s]://user:pass@host[:port][,host[:port]...][/vhost][?params]; may be given more "
                              "than once, tried in order; visible to every local user in ps: see --url-file "
                              "(default: --url-file, else $WARREN_URL, else " + std::string(default_url) + ")")
                  ->type_name("URL");
  command
      .add_option("--url-file", common.url_file,
                  "read the URLs from PATH instead, one a line, tried in order (blank lines and lines starting "
                  "with # skipped): the credentials stay off the command line")
      ->type_name("PATH")
      // An empty path ("$UNSET_VARIABLE") must not fall back to WARREN_URL or the default.
      ->check(CLI::Validator([](const std::string& path) { return path.empty() ? "an empty path" : ""; }, ""))
      ->excludes(url);
  command
      .add_option("--password-file", common.password_file,
                  "the password (or OAuth 2 token) from PATH in place of the URL's: read before each dial, and "
                  "re-read every 5 s and ahead of a JWT's expiry; a changed one goes to the broker in place "
                  "(connection.update-secret)")
      ->type_name("PATH")
      ->check(CLI::Validator([](const std::string& path) { return path.empty() ? "an empty path" : ""; }, ""));
  command.add_option("--driver", common.driver, "the event loop: uv or asio")
      ->check(CLI::IsMember({"uv", "asio"}))
      ->default_str("uv");
  command.add_option("--log-level", common.log_level, "the client's event records on stderr, from this level up")
      ->check(CLI::IsMember({"debug", "info", "warning", "error", "off"}))
      ->default_str("off");
  command.add_option("--log-format", common.log_format, "event records as text or as JSON, one a line")
      ->check(CLI::IsMember({"text", "json"}))
      ->default_str("text");
  command.add_option("--metrics-listen", common.metrics_listen,
                     "serve the client's metrics at http://HOST:PORT/metrics (Prometheus text); port 0: any free port")
      ->type_name("HOST:PORT");
}

}  // namespace warren::cli
