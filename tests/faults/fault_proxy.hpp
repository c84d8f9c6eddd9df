// A TCP proxy for fault tests, between the client and the broker on loopback: it forwards
// both ways until told to cut every connection, stall (hold the bytes, keep the sockets), or
// delay each chunk. One thread accepts and pumps every pair with poll(); the controls are
// safe from the test's thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace warren::test {

class FaultProxy {
 public:
  explicit FaultProxy(std::uint16_t broker_port) : broker_port_(broker_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 64) != 0)
      throw std::runtime_error("fault proxy: cannot listen");
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~FaultProxy() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
    std::lock_guard lock(mutex_);
    for (auto& p : pairs_) close_pair(p);
  }
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  // Closes every connection now (both sides see a reset or an end of stream).
  void cut_all() { cut_ = true; }
  // Holds every byte, both ways, while true; the sockets stay open.
  void stall(bool on) { stalled_ = on; }
  // Waits this long before forwarding each chunk.
  void delay(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }
  [[nodiscard]] int accepted() const { return accepted_; }

 private:
  struct Pair {
    int client = -1, broker = -1;
  };
  static void close_pair(Pair& p) {
    if (p.client >= 0) ::close(p.client);
    if (p.broker >= 0) ::close(p.broker);
    p.client = p.broker = -1;
  }

  int dial_broker() const {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(broker_port_);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(s);
      return -1;
    }
    return s;
  }

  // Moves what is readable on `from` to `to`; false when either side is done.
  bool forward(int from, int to) {
    char buffer[65536];
    const ssize_t n = ::recv(from, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t w = ::send(to, buffer + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
      if (w <= 0) return false;
      sent += w;
    }
    return true;
  }

  void run() {
    while (!stop_) {
      if (cut_.exchange(false)) {
        std::lock_guard lock(mutex_);
        for (auto& p : pairs_) close_pair(p);
        pairs_.clear();
      }
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      {
        std::lock_guard lock(mutex_);
        if (!stalled_)
          for (auto& p : pairs_) {
            fds.push_back({p.client, POLLIN, 0});
            fds.push_back({p.broker, POLLIN, 0});
          }
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int c = ::accept(listener_, nullptr, nullptr);
        if (c >= 0) {
          int b = dial_broker();
          if (b < 0) {
            ::close(c);  // the broker is down: the client sees its connection refused, in effect
          } else {
            std::lock_guard lock(mutex_);
            pairs_.push_back({c, b});
            ++accepted_;
          }
        }
      }
      std::lock_guard lock(mutex_);
      for (std::size_t i = 1; i + 1 < fds.size(); i += 2) {
        Pair& p = pairs_[(i - 1) / 2];
        bool ok = true;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ok = forward(p.client, p.broker);
        if (ok && fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) ok = forward(p.broker, p.client);
        if (!ok) close_pair(p);
      }
      std::erase_if(pairs_, [](const Pair& p) { return p.client < 0; });
    }
  }

  std::uint16_t broker_port_;
  std::uint16_t port_ = 0;
  int listener_ = -1;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<Pair> pairs_;
  std::atomic<bool> stop_{false}, cut_{false}, stalled_{false};
  std::atomic<int> delay_ms_{0};
  std::atomic<int> accepted_{0};
};

}  // namespace warren::test
