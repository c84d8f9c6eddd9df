#include "metrics_endpoint.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <exception>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "metrics_request.hpp"

namespace warren::cli {
namespace {

using Clock = std::chrono::steady_clock;
using metrics_request::Answer;

// The bounds (docs/warren-cli.md, "SECURITY"). 16 descriptors at most, of the 1024 a process
// usually may open, leave the command its own (its --exec pipes); every connection ends within
// 5 s of its accept whatever its client does, so none holds a place for longer.
constexpr std::size_t max_connections = 16;
constexpr auto connection_lifetime = std::chrono::seconds(5);
// Handshakes the kernel completes while the thread waits for a core: they hold none of the
// process's descriptors, and a burst beyond them sees its SYN dropped (retried a second later).
constexpr int listen_backlog = 256;
// Connections waiting in the backlog are taken a batch at a time, so that a flood of them
// cannot keep the loop from answering the ones it has.
constexpr int max_accepts_per_turn = 64;
// Out of descriptors (the command's own use, not ours): try again later rather than spin.
constexpr auto accept_pause = std::chrono::milliseconds(100);
// After its answer, what a client still sends (a body, the rest of an oversized head) is read
// and dropped up to this much, so that the close does not reset the answer away; a client
// that sends more is cut off: reading it for as long as it likes would cost a core.
constexpr std::size_t max_drain_bytes = 64 * 1024;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

// One request per connection ("Connection: close"): no idle keep-alive connection holds a place.
enum class Phase : std::uint8_t { reading, writing, draining };

struct Connection {
  Fd fd;
  Clock::time_point deadline;
  Phase phase = Phase::reading;
  std::string head = std::string(metrics_request::max_head_bytes, '\0');  // all it will ever keep
  std::size_t head_bytes = 0;
  std::string response{};
  std::size_t sent = 0;
  std::size_t drained = 0;
};

struct Status {
  int code;
  std::string_view reason;
};

Status status_of(Answer answer) noexcept {
  switch (answer) {
    case Answer::metrics: return {200, "OK"};
    case Answer::bad_request: return {400, "Bad Request"};
    case Answer::not_found: return {404, "Not Found"};
    case Answer::method_not_allowed: return {405, "Method Not Allowed"};
    case Answer::uri_too_long: return {414, "URI Too Long"};
    case Answer::too_large: return {431, "Request Header Fields Too Large"};
    case Answer::incomplete: break;  // never answered
  }
  return {500, "Internal Server Error"};
}

// Every refusal the endpoint can answer, counted under its status code.
constexpr std::array<Status, 7> refusals{{{400, "Bad Request"},
                                          {404, "Not Found"},
                                          {405, "Method Not Allowed"},
                                          {408, "Request Timeout"},
                                          {414, "URI Too Long"},
                                          {431, "Request Header Fields Too Large"},
                                          {500, "Internal Server Error"}}};
constexpr std::size_t refusal_index(int code) noexcept {
  for (std::size_t i = 0; i < refusals.size(); ++i)
    if (refusals[i].code == code) return i;
  return refusals.size() - 1;
}

std::string compose(Status status, std::string_view content_type, std::string_view body, bool head,
                    std::string_view more_headers = {}) {
  std::string out = "HTTP/1.1 " + std::to_string(status.code) + " " + std::string(status.reason) +
                    "\r\nContent-Type: " + std::string(content_type) +
                    "\r\nContent-Length: " + std::to_string(body.size()) +
                    // Ranges are not served: the whole document is small, and a range list
                    // is how one request asks for a response many times the document's size.
                    "\r\nAccept-Ranges: none\r\nConnection: close\r\n" + std::string(more_headers) + "\r\n";
  if (!head) out += body;
  return out;
}

std::string refusal(Status status, bool head) {
  const bool method = status.code == 405;
  const std::string body = method              ? "/metrics answers GET and HEAD\n"
                           : status.code == 503 ? "too many connections to /metrics\n"
                                                : std::string(status.reason) + "\n";
  return compose(status, "text/plain; charset=utf-8", body, head, method ? "Allow: GET, HEAD\r\n" : "");
}

}  // namespace

struct MetricsEndpoint::Serving {
  Fd listener;
  Fd wake;  // an eventfd: the destructor's "stop", seen by the loop's next poll however late it starts
  std::shared_ptr<client::Metrics> metrics;
  client::Counter* refused = nullptr;
  const std::string busy = refusal({503, "Service Unavailable"}, false);
  std::array<client::Counter*, refusals.size()> rejected{};
  std::thread thread;

  void run();
  void accept_new(std::vector<Connection>& connections, Clock::time_point now,
                  std::optional<Clock::time_point>& paused_until);
  void read_head(Connection& c);
  void answer(Connection& c, metrics_request::Judgement judgement);
  void write_response(Connection& c);
  void drain(Connection& c);
  void expire(Connection& c);
};

void MetricsEndpoint::Serving::run() {
  std::vector<Connection> connections;
  connections.reserve(max_connections);
  std::vector<pollfd> polled;
  polled.reserve(2 + max_connections);
  std::optional<Clock::time_point> paused_until;
  for (;;) {
    auto now = Clock::now();
    if (paused_until && now >= *paused_until) paused_until.reset();
    polled.clear();
    polled.push_back({wake.get(), POLLIN, 0});
    polled.push_back({paused_until ? -1 : listener.get(), POLLIN, 0});  // poll skips a negative fd
    std::optional<Clock::time_point> next = paused_until;
    for (const auto& c : connections) {
      polled.push_back({c.fd.get(), static_cast<short>(c.phase == Phase::writing ? POLLOUT : POLLIN), 0});
      next = next ? std::min(*next, c.deadline) : c.deadline;
    }
    int timeout_ms = -1;
    if (next) {
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(wait, 0, INT_MAX));
    }
    if (::poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR) {
      // Only EINVAL or ENOMEM: nothing here will make it pass sooner. Serve nobody for a while
      // rather than spin.
      std::this_thread::sleep_for(accept_pause);
      continue;
    }
    if (polled[0].revents != 0) return;
    now = Clock::now();
    // An exception here (std::bad_alloc under a memory limit) would end the process from this
    // thread: it ends the one connection instead, or this turn's accepting.
    for (std::size_t i = 0; i < connections.size(); ++i) {
      auto& c = connections[i];
      try {
        if (polled[2 + i].revents != 0) {
          switch (c.phase) {
            case Phase::reading: read_head(c); break;
            case Phase::writing: write_response(c); break;
            case Phase::draining: drain(c); break;
          }
        }
        if (c.fd.get() >= 0 && now >= c.deadline) expire(c);
      } catch (const std::exception&) {
        c.fd.reset();
      }
    }
    std::erase_if(connections, [](const Connection& c) { return c.fd.get() < 0; });
    try {
      if ((polled[1].revents & POLLIN) != 0) accept_new(connections, now, paused_until);
    } catch (const std::exception&) {
      paused_until = now + accept_pause;
    }
  }
}

void MetricsEndpoint::Serving::accept_new(std::vector<Connection>& connections, Clock::time_point now,
                                          std::optional<Clock::time_point>& paused_until) {
  for (int i = 0; i < max_accepts_per_turn; ++i) {
    // Close-on-exec from its first instant: a command's child never holds a scraper's socket.
    Fd fd{::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
    if (fd.get() < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;  // that one is gone
      if (errno != EAGAIN && errno != EWOULDBLOCK) paused_until = now + accept_pause;  // EMFILE and the like
      return;
    }
    if (connections.size() >= max_connections) {
      // Refused, and said so: a scraper logs a 503 where a reset would say nothing. One send
      // into a new socket's empty buffer, never a wait; the request, if it came already, read
      // first, since a close with input unread resets the connection and can lose the 503.
      std::array<char, 4096> discard;
      (void)::recv(fd.get(), discard.data(), discard.size(), MSG_DONTWAIT);
      (void)::send(fd.get(), busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      refused->add();
      continue;
    }
    connections.push_back(Connection{.fd = std::move(fd), .deadline = now + connection_lifetime});
  }
}

void MetricsEndpoint::Serving::read_head(Connection& c) {
  bool ended = false;
  while (c.head_bytes < c.head.size()) {
    const auto n = ::recv(c.fd.get(), c.head.data() + c.head_bytes, c.head.size() - c.head_bytes, 0);
    if (n > 0) {
      c.head_bytes += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    ended = true;  // the client closed (or reset) its side
    break;
  }
  // Judged before the end is: a client may send its request and close its side at once.
  const auto judgement = metrics_request::judge({c.head.data(), c.head_bytes});
  if (judgement.answer != Answer::incomplete) return answer(c, judgement);
  if (ended) c.fd.reset();
}

void MetricsEndpoint::Serving::answer(Connection& c, metrics_request::Judgement judgement) {
  auto status = status_of(judgement.answer);
  if (judgement.answer == Answer::metrics) {
    try {
      c.response = compose(status, "text/plain; version=0.0.4; charset=utf-8", metrics->prometheus_text(), judgement.head);
    } catch (const std::exception&) {  // std::bad_alloc under a memory limit: the scraper learns why
      status = {500, "Internal Server Error"};
    }
  }
  if (status.code != 200) {
    rejected[refusal_index(status.code)]->add();
    c.response = refusal(status, judgement.head);
  }
  c.head = {};  // read no more into it; what the client sends from now on is drained unread
  c.head_bytes = 0;
  c.phase = Phase::writing;
  write_response(c);
}

void MetricsEndpoint::Serving::write_response(Connection& c) {
  while (c.sent < c.response.size()) {
    const auto n = ::send(c.fd.get(), c.response.data() + c.sent, c.response.size() - c.sent, MSG_NOSIGNAL);
    if (n >= 0) {
      c.sent += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.fd.reset();
    return;
  }
  // All written. Closed at once, a socket with unread input sends a reset that can destroy the
  // response before the client reads it; so: our side ends, and what the client still sends is
  // read and dropped until it closes (within max_drain_bytes and the connection's time).
  c.response = {};
  ::shutdown(c.fd.get(), SHUT_WR);
  c.phase = Phase::draining;
  drain(c);
}

void MetricsEndpoint::Serving::drain(Connection& c) {
  std::array<char, 4096> discard;
  while (c.drained < max_drain_bytes) {
    const auto n = ::recv(c.fd.get(), discard.data(), discard.size(), 0);
    if (n > 0) {
      c.drained += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;  // the client closed: so do we
  }
  c.fd.reset();
}

void MetricsEndpoint::Serving::expire(Connection& c) {
  if (c.phase == Phase::reading) {
    // Its request did not come whole in time: said in one send that cannot wait, then closed.
    const Status timeout{408, "Request Timeout"};
    rejected[refusal_index(timeout.code)]->add();
    const auto text = refusal(timeout, false);
    (void)::send(c.fd.get(), text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  c.fd.reset();
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Serving> serving, std::string address)
    : serving_(std::move(serving)), address_(std::move(address)) {}

MetricsEndpoint::~MetricsEndpoint() {
  // The eventfd stays readable: a thread that has not reached its first poll yet stops there,
  // so this never waits for the thread's start, only for its end.
  const std::uint64_t one = 1;
  (void)!::write(serving_->wake.get(), &one, sizeof one);
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

  // Not the command line's fault: a port in use, or an address this host does not have.
  const auto cannot_listen = [&] {
    return Error{std::make_error_code(std::errc::address_not_available),
                 "--metrics-listen " + std::string(host_port) + ": cannot listen there (in use, or not this host's address)"};
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return cannot_listen();
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  auto serving = std::make_unique<Serving>();
  for (const addrinfo* a = addresses.get(); a != nullptr && serving->listener.get() < 0; a = a->ai_next) {
    // Close-on-exec from its first instant, as every descriptor warren opens.
    Fd fd{::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol)};
    if (fd.get() < 0) continue;
    const int yes = 1, no = 0;
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // restart while TIME_WAIT
    if (a->ai_family == AF_INET6) (void)::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), listen_backlog) != 0) continue;
    serving->listener = std::move(fd);
  }
  if (serving->listener.get() < 0) return cannot_listen();
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof bound;
  if (::getsockname(serving->listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_size) != 0)
    return cannot_listen();
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  serving->wake = Fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  if (serving->wake.get() < 0) return Error{std::error_code(errno, std::system_category()), "--metrics-listen: eventfd"};

  serving->metrics = std::move(metrics);
  // The endpoint's own figures, made now: present (at 0) in the first scrape, and nothing to
  // register while a flood is answered.
  serving->refused = &serving->metrics->counter(
      {.name = "warren.metrics_endpoint.connections.refused",
       .unit = "{connection}",
       .help = "Connections to --metrics-listen refused with a 503: the endpoint already had 16 open"});
  for (std::size_t i = 0; i < refusals.size(); ++i)
    serving->rejected[i] = &serving->metrics->counter(
        {.name = "warren.metrics_endpoint.requests.rejected",
         .unit = "{request}",
         .help = "Requests to --metrics-listen answered with an error status instead of the figures"},
        {{"http.response.status_code", std::to_string(refusals[i].code)}});

  // Bound and listening already: a scraper that comes before the thread runs waits in the backlog.
  serving->thread = std::thread([s = serving.get()] { s->run(); });
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::unique_ptr<MetricsEndpoint>(
      new MetricsEndpoint(std::move(serving), "http://" + shown + ":" + std::to_string(port) + "/metrics"));
}

}  // namespace warren::cli
