#include "metrics_endpoint.hpp"

#include <httplib.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <thread>

namespace warren::cli {

struct MetricsEndpoint::Serving {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> served{false};  // listen_after_bind() returned
};

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Serving> serving, std::string address)
    : serving_(std::move(serving)), address_(std::move(address)) {}

MetricsEndpoint::~MetricsEndpoint() {
  // stop() does nothing until the thread is in its listen loop, and start() does not wait for
  // that (a command that owns its signals cannot block on a thread's start): ask until it ended.
  // Once is enough when it is (a second stop() would find no socket).
  while (!serving_->served.load()) {
    if (serving_->server.is_running()) {
      serving_->server.stop();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (serving_->thread.joinable()) serving_->thread.join();
}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(std::string_view host_port,
                                                                std::shared_ptr<client::Metrics> metrics) {
  const auto colon = host_port.rfind(':');
  const auto bad = [&] {
    return make_error(errc::invalid_argument,
                      "--metrics-listen: expected HOST:PORT (127.0.0.1:9464, [::1]:9464), not '" + std::string(host_port) + "'");
  };
  if (colon == std::string_view::npos || colon == 0) return bad();
  std::string host(host_port.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const auto port_text = host_port.substr(colon + 1);
  int port = -1;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port < 0 || port > 65535 || host.empty())
    return bad();

  auto serving = std::make_unique<Serving>();
  // One thread serves: a scrape is small and rare, and each idle thread would be a stack.
  serving->server.new_task_queue = [] { return new httplib::ThreadPool(1); };
  serving->server.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics->prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  // Not the command line's fault: a port in use, or an address this host does not have.
  const auto cannot_listen = [&] {
    return Error{std::make_error_code(std::errc::address_not_available),
                 "--metrics-listen " + std::string(host_port) + ": cannot listen there (in use, or not this host's address)"};
  };
  if (port == 0) {
    port = serving->server.bind_to_any_port(host);
    if (port < 0) return cannot_listen();
  } else if (!serving->server.bind_to_port(host, port)) {
    return cannot_listen();
  }
  // Bound and listening already: a scraper that comes before the thread runs waits in the backlog.
  serving->thread = std::thread([s = serving.get()] {
    s->server.listen_after_bind();
    s->served.store(true);
  });
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::unique_ptr<MetricsEndpoint>(
      new MetricsEndpoint(std::move(serving), "http://" + shown + ":" + std::to_string(port) + "/metrics"));
}

}  // namespace warren::cli
