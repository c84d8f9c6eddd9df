// --metrics-listen HOST:PORT: the client's figures (warren/client/metrics.hpp) served at
// /metrics in Prometheus's text format, for a scraper, by a server this small because it must
// not hurt the process it observes: every connection bounded in bytes kept, header lines and
// lifetime, at most 16 at once (more are refused and counted), GET and HEAD only, no ranges
// (docs/warren-cli.md, "SECURITY", says why not cpp-httplib). One thread of its own polls every
// connection, so a stalled client never holds a scrape back, and reads the figures as a
// snapshot: the command's loop is never stopped for a scrape. It may not block the command:
// start() and the destructor never wait on the thread's start.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "warren/client/metrics.hpp"
#include "warren/result.hpp"

namespace warren::cli {

class MetricsEndpoint {
 public:
  // Listening when it returns. "127.0.0.1:9464", "[::1]:9464", "0.0.0.0:0" (any free port).
  // A malformed address is errc::invalid_argument (a usage error); a port in use or an address
  // this host does not have is std::errc::address_not_available.
  [[nodiscard]] static Result<std::unique_ptr<MetricsEndpoint>> start(std::string_view host_port,
                                                                      std::shared_ptr<client::Metrics> metrics);
  ~MetricsEndpoint();  // stops serving, closes every connection and joins its thread
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // "http://127.0.0.1:9464/metrics": with the port it got when asked for 0.
  [[nodiscard]] const std::string& address() const noexcept { return address_; }

 private:
  struct Serving;
  explicit MetricsEndpoint(std::unique_ptr<Serving> serving, std::string address);
  std::unique_ptr<Serving> serving_;
  std::string address_;
};

}  // namespace warren::cli
