// A blocking pump for putting the engine on a real socket in tests: poll(), read 64 KiB,
// handle_bytes, drain events as text, write what is pending, fire deadlines. The real
// drivers (libuv, Asio) are transports/; this exists so the engine meets RabbitMQ itself.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/broker_env.hpp"
#include "warren/engine/connection.hpp"
#include "warren/engine/describe.hpp"
#include "warren/tls/tls_session.hpp"

namespace warren::test {

class EnginePump {
 public:
  // Over TLS when `tls` is given (to RMQ_TLS_PORT): the engine's bytes pass through a
  // TlsSession both ways.
  explicit EnginePump(engine::ConnectionOptions options, std::optional<tls::TlsSession> tls = std::nullopt,
                      std::uint16_t port = 0)
      : conn(std::move(options), std::chrono::steady_clock::now()), tls_(std::move(tls)), buffer_(64 * 1024) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port ? port : broker_port());
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect to the test broker failed");
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~EnginePump() { ::close(fd_); }

  engine::Connection conn;
  std::deque<std::string> events;
  std::optional<Error> tls_error;  // the TLS session's refusal, if any
  std::function<void(const engine::Event&)> on_event;  // sees each event while its views are valid

  engine::Instant now() const { return std::chrono::steady_clock::now(); }

  // Pumps I/O until `done` holds or `limit` passes; false on timeout.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto give_up = now() + limit;
    for (;;) {
      drain();
      write();
      if (done()) return true;
      if (now() >= give_up || conn.finished()) return done();
      int wait_ms = 100;
      if (auto t = conn.poll_timeout()) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*t - now()).count();
        wait_ms = static_cast<int>(std::clamp<long long>(ms, 0, 100));
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, wait_ms) > 0) {
        ssize_t n = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
        if (n <= 0) {
          conn.handle_eof(now());
        } else if (!tls_) {
          conn.handle_bytes(std::span(buffer_.data(), static_cast<std::size_t>(n)), now());
        } else {
          auto r = tls_->handle_ciphertext(std::span(buffer_.data(), static_cast<std::size_t>(n)));
          if (!r.ok()) {
            tls_error = r.error();
            conn.handle_eof(now());
          } else if (!tls_->plaintext().empty()) {
            // They stay put until the next handle_ciphertext(), after the events are drained.
            conn.handle_bytes(tls_->plaintext(), now());
          }
        }
      }
      conn.handle_timeout(now());
    }
  }
  bool wait_for(const std::string& prefix, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    return run_until([&] { return find(prefix) != events.end(); }, limit);
  }
  std::deque<std::string>::iterator find(const std::string& prefix) {
    for (auto it = events.begin(); it != events.end(); ++it)
      if (it->rfind(prefix, 0) == 0) return it;
    return events.end();
  }
  std::string take(const std::string& prefix) {
    if (!wait_for(prefix)) return "<no event starting with " + prefix + ">";
    auto it = find(prefix);
    std::string s = *it;
    events.erase(it);
    return s;
  }

 private:
  void drain() {
    while (auto e = conn.poll_event()) {
      if (on_event) on_event(*e);
      events.push_back(engine::to_string(*e));
    }
  }
  void write() {
    if (tls_) {
      for (auto part : conn.pending_output()) (void)tls_->write_plaintext(part);
      conn.consume_output(conn.pending_output_bytes());
      drain();
      auto out = tls_->pending_ciphertext();
      if (!out.empty()) {
        ssize_t n = ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL);
        if (n > 0) tls_->consume_ciphertext(static_cast<std::size_t>(n));
      }
      return;
    }
    while (conn.pending_output_bytes()) {
      auto view = conn.pending_output();
      iovec iov[wire::OutputView::max_parts];
      for (std::size_t i = 0; i < view.count; ++i)
        iov[i] = {const_cast<std::byte*>(view.parts[i].data()), view.parts[i].size()};
      ssize_t n = ::writev(fd_, iov, static_cast<int>(view.count));
      if (n <= 0) return;
      conn.consume_output(static_cast<std::size_t>(n));
      drain();
    }
  }

  int fd_ = -1;
  std::optional<tls::TlsSession> tls_;
  std::vector<std::byte> buffer_;
};

}  // namespace warren::test
