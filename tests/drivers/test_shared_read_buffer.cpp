// The read buffer the streams of a thread share (client::ReadBuffer): an idle connection holds
// none of it, so each read must hand its bytes on before the next stream's read reuses it,
// and a stream that stops and resumes reading must still read what came meanwhile (on Asio no
// read is in flight while it waits, so the bytes' edge came while nobody waited for it).
// Peers on loopback, no broker.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "drivers/listener.hpp"
#include "integration/client_fixture.hpp"
#include "warren/client/read_buffer.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;

TEST(ReadBuffer, the_threads_buffer_is_lent_to_one_read_at_a_time) {
  std::byte* first = nullptr;
  {
    const client::ReadBuffer outer;
    first = outer.data();
    const client::ReadBuffer inner;  // a read inside a read: a buffer of its own
    EXPECT_NE(inner.data(), outer.data());
    EXPECT_EQ(inner.span().size(), client::ReadBuffer::bytes);
  }
  const client::ReadBuffer again;  // handed back: the next read has the thread's buffer
  EXPECT_EQ(again.data(), first);
}

// Keeps what it reads: bytes the shared buffer mixed up would show in it.
struct Collector final : client::StreamEvents {
  bool connected = false;
  std::string text;
  std::optional<Error> error;
  void on_connected() override { connected = true; }
  void on_bytes(std::span<const std::byte> b) override {
    text.append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void on_written(std::size_t) override {}
  void on_stream_error(Error cause) override { error = std::move(cause); }
};

class SharedReadBuffer : public ::testing::TestWithParam<DriverKind> {
 protected:
  struct End {
    Collector events;
    std::unique_ptr<client::Stream> stream;
    int peer = -1;
  };
  void connect(End& end) {
    end.stream = loop.driver().dial(client::Endpoint{"127.0.0.1", listener.port()}, 5000ms, std::nullopt, end.events);
    ASSERT_TRUE(loop.run_until([&] { return end.events.connected || end.events.error; }));
    ASSERT_TRUE(end.events.connected) << end.events.error->to_string();
    end.peer = listener.accept();
    ASSERT_GE(end.peer, 0);
  }
  static void send(const End& end, const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(end.peer, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      sent += static_cast<std::size_t>(n);
    }
  }
  void TearDown() override {
    for (End* end : {&a, &b}) {
      if (end->stream) end->stream->close();
      if (end->peer >= 0) ::close(end->peer);
    }
  }

  Loop loop{GetParam()};
  Listener listener;
  End a, b;
};

TEST_P(SharedReadBuffer, two_streams_each_read_their_own_bytes_through_the_one_buffer) {
  ASSERT_NO_FATAL_FAILURE(connect(a));
  ASSERT_NO_FATAL_FAILURE(connect(b));
  // More than one buffer's worth on one, a little on the other, both waiting at once.
  const std::string to_a(client::ReadBuffer::bytes + 5000, 'a'), to_b(3000, 'b');
  std::thread writer([&] {
    send(a, to_a);
    send(b, to_b);
  });
  const bool read = loop.run_until([&] {
    return (a.events.text.size() >= to_a.size() && b.events.text.size() >= to_b.size()) || a.events.error || b.events.error;
  });
  writer.join();
  ASSERT_TRUE(read) << a.events.text.size() << " and " << b.events.text.size() << " bytes read";
  EXPECT_EQ(a.events.text, to_a);
  EXPECT_EQ(b.events.text, to_b);
}

TEST_P(SharedReadBuffer, reading_held_then_resumed_reads_what_came_meanwhile) {
  ASSERT_NO_FATAL_FAILURE(connect(a));
  send(a, "first");
  ASSERT_TRUE(loop.run_until([&] { return a.events.text.size() >= 5 || a.events.error; }, 2000ms));
  a.stream->set_reading(false);
  send(a, "second");
  EXPECT_FALSE(loop.run_until([&] { return a.events.text.size() > 5; }, 300ms)) << "read while reading was held";
  a.stream->set_reading(true);
  ASSERT_TRUE(loop.run_until([&] { return a.events.text.size() >= 11 || a.events.error; }, 2000ms))
      << "the bytes that came while reading was held were not read when it resumed";
  EXPECT_EQ(a.events.text, "firstsecond");
  // And the stream reads on as before.
  send(a, "third");
  ASSERT_TRUE(loop.run_until([&] { return a.events.text.size() >= 16 || a.events.error; }, 2000ms));
  EXPECT_EQ(a.events.text, "firstsecondthird");
}

INSTANTIATE_TEST_SUITE_P(Drivers, SharedReadBuffer, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test
