// What a connected stream asks the kernel's poller to wake the loop for (issue 37): bytes to
// read, and room to write only while a write waits for it. A socket registered for
// writability is writable almost always, so every re-arm of its registration (Asio re-arms it
// for each wait for readability) reports it at once: a wake-up of the loop for nothing after
// every read. Read from the poller itself (/proc/self/fdinfo of the loop's epoll descriptor).
// Peers on loopback, no broker.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "drivers/listener.hpp"
#include "integration/client_fixture.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;

struct Counter final : client::StreamEvents {
  bool connected = false;
  std::size_t bytes = 0, written = 0;
  std::optional<Error> error;
  void on_connected() override { connected = true; }
  void on_bytes(std::span<const std::byte> b) override { bytes += b.size(); }
  void on_written(std::size_t n) override { written += n; }
  void on_stream_error(Error cause) override { error = std::move(cause); }
};

std::string link_of(int fd) {
  char target[256];
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

// This process's descriptor whose local port is `port` (the client's end of the connection).
int socket_with_local_port(std::uint16_t port) {
  DIR* dir = ::opendir("/proc/self/fd");
  int found = -1;
  while (dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2 || link_of(fd).rfind("socket:", 0) != 0) continue;
    sockaddr_in a{};
    socklen_t len = sizeof a;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && a.sin_family == AF_INET && ntohs(a.sin_port) == port)
      found = fd;
  }
  ::closedir(dir);
  return found;
}

// The events `fd` is registered for in any of this process's epoll descriptors ("tfd: FD
// events: HEX" in the epoll descriptor's fdinfo); nullopt if none holds it.
std::optional<unsigned> registered_events(int fd) {
  DIR* dir = ::opendir("/proc/self/fd");
  std::optional<unsigned> events;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || link_of(std::atoi(name.c_str())) != "anon_inode:[eventpoll]") continue;
    std::ifstream info("/proc/self/fdinfo/" + name);
    for (std::string line; std::getline(info, line);) {
      std::istringstream in(line);
      std::string tag, events_tag;
      int target = -1;
      unsigned mask = 0;
      if (in >> tag >> target >> events_tag >> std::hex >> mask && tag == "tfd:" && target == fd) events = mask;
    }
  }
  ::closedir(dir);
  return events;
}

class PollRegistration : public ::testing::TestWithParam<DriverKind> {
 protected:
  void TearDown() override {
    if (stream) stream->close();
    if (peer >= 0) ::close(peer);
  }
  Loop loop{GetParam()};
  Listener listener;
  Counter events;
  std::unique_ptr<client::Stream> stream;
  int peer = -1;
};

TEST_P(PollRegistration, a_connected_stream_waits_for_bytes_not_for_room_to_write) {
#if defined(ASIO_DISABLE_EPOLL)
  // -Dasio_io_uring=true: Asio polls through io_uring, and there is no epoll registration.
  if (GetParam() == DriverKind::asio) GTEST_SKIP() << "Asio on io_uring registers nothing with epoll";
#endif
  stream = loop.driver().dial(client::Endpoint{"127.0.0.1", listener.port()}, 5000ms, std::nullopt, events);
  ASSERT_TRUE(loop.run_until([&] { return events.connected || events.error; }));
  ASSERT_TRUE(events.connected) << events.error->to_string();
  peer = listener.accept();
  ASSERT_GE(peer, 0);
  sockaddr_in client_end{};
  socklen_t len = sizeof client_end;
  ASSERT_EQ(::getpeername(peer, reinterpret_cast<sockaddr*>(&client_end), &len), 0);
  const int fd = socket_with_local_port(ntohs(client_end.sin_port));
  ASSERT_GE(fd, 0) << "the client's socket is not among this process's descriptors";

  // Some traffic each way first: a write that completed and a read handed on.
  const std::string hello = "hello";
  const std::span<const std::byte> part(reinterpret_cast<const std::byte*>(hello.data()), hello.size());
  stream->write(std::span<const std::span<const std::byte>>(&part, 1));
  ASSERT_TRUE(loop.run_until([&] { return events.written == hello.size() || events.error; }));
  ASSERT_EQ(::send(peer, "world", 5, MSG_NOSIGNAL), 5);
  ASSERT_TRUE(loop.run_until([&] { return events.bytes == 5 || events.error; }));
  ASSERT_FALSE(events.error) << events.error->to_string();
  loop.run_until([] { return false; }, 50ms);  // the next wait for bytes is in place

  const auto registered = registered_events(fd);
  ASSERT_TRUE(registered) << "the socket is not registered with the loop's poller";
  EXPECT_TRUE(*registered & EPOLLIN) << "not waiting for bytes: events 0x" << std::hex << *registered;
  EXPECT_FALSE(*registered & EPOLLOUT) << "registered for room to write with no write waiting: events 0x" << std::hex
                                       << *registered;
}

INSTANTIATE_TEST_SUITE_P(Drivers, PollRegistration, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test
