// Read batching (client::ReadBatching: throughput mode, and past bursts only) on each driver's stream, against a peer on loopback
// that writes what the test says when it says. The rule is about the kernel's mark and a
// timer, so these run on real time, with margins wide enough for a loaded 2-core machine:
// "held" means not read within 150 ms of a max_wait of 1.5 s; "at once" means well within it.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include "drivers/listener.hpp"
#include "integration/client_fixture.hpp"

namespace warren::test {
namespace {

using namespace std::chrono_literals;

// The client's side of a stream: counts what it reads and, as the client does, says how many
// deliveries each read completed (here a setting: two, a stream of messages, unless a test
// says one).
struct Reader final : client::StreamEvents {
  bool connected = false;
  std::size_t bytes = 0;
  std::size_t reads = 0;
  std::optional<Error> error;
  client::Stream* stream = nullptr;
  std::size_t deliveries_per_read = 2;
  void on_connected() override { connected = true; }
  void on_bytes(std::span<const std::byte> b) override {
    bytes += b.size();
    ++reads;
    if (stream && deliveries_per_read) stream->note_deliveries(deliveries_per_read);
  }
  void on_written(std::size_t) override {}
  void on_stream_error(Error cause) override { error = std::move(cause); }
};

class ReadBatching : public ::testing::TestWithParam<DriverKind> {
 protected:
  // Dials the listener, with `batching` unless it is nullopt, and accepts the peer's end.
  void connect(std::optional<client::ReadBatching> batching) {
    stream = loop.driver().dial(client::Endpoint{"127.0.0.1", listener.port()}, 5000ms, std::nullopt, events);
    events.stream = stream.get();
    if (batching) stream->set_read_batching(*batching);
    ASSERT_TRUE(loop.run_until([&] { return events.connected || events.error; }));
    ASSERT_TRUE(events.connected) << events.error->to_string();
    peer = listener.accept();
    ASSERT_GE(peer, 0);
  }
  void TearDown() override {
    if (stream) stream->close();
    if (peer >= 0) ::close(peer);
  }
  void send(std::size_t n) {
    const std::string bytes(n, 'x');
    ASSERT_EQ(::send(peer, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(n));
  }
  // Runs the loop for `d`, then says whether `total` bytes were read by then.
  bool read_within(std::size_t total, std::chrono::milliseconds d) {
    return loop.run_until([&] { return events.bytes >= total || events.error.has_value(); }, d) && !events.error;
  }
  // Bytes just sent that sit below the mark: held (not read within 150 ms), then read by the
  // timer, and not before max_wait (1.5 s here; 1 s allows for the timer's rounding).
  void expect_held_until_max_wait(std::size_t total, const char* why_not_held) {
    const auto sent = std::chrono::steady_clock::now();
    EXPECT_FALSE(read_within(total, 150ms)) << why_not_held;
    ASSERT_TRUE(read_within(total, 10s)) << "bytes below the mark were never read";
    EXPECT_GE(std::chrono::steady_clock::now() - sent, 1000ms) << "read before max_wait";
  }

  Loop loop{GetParam()};
  Listener listener;
  Reader events;
  std::unique_ptr<client::Stream> stream;
  int peer = -1;
};

constexpr client::ReadBatching batching{.min_bytes = 4096, .max_wait = 1500ms};

TEST_P(ReadBatching, while_bytes_keep_coming_a_read_waits_for_the_mark_and_reads_it_in_one_go) {
  connect(batching);
  send(100);  // the first bytes after a quiet spell: read at once
  ASSERT_TRUE(read_within(100, 1000ms));
  send(100);  // streaming now: below the mark, so held
  EXPECT_FALSE(read_within(200, 150ms)) << "read before the mark or max_wait";
  const std::size_t reads_before = events.reads;
  send(4000);  // 4,100 bytes wait now: past the mark
  ASSERT_TRUE(read_within(4200, 1000ms)) << "the mark was passed but nothing was read";
  EXPECT_EQ(events.reads, reads_before + 1) << "the held bytes and the rest came in one read";
}

TEST_P(ReadBatching, bytes_below_the_mark_are_read_after_max_wait_and_a_quiet_stream_reads_at_once_again) {
  connect(batching);
  send(100);
  ASSERT_TRUE(read_within(100, 1000ms));
  send(10);  // below the mark: held until max_wait
  ASSERT_NO_FATAL_FAILURE(expect_held_until_max_wait(110, "read before the mark or max_wait"));
  // The timer's next read finds nothing: quiet again, so the next bytes are read at once.
  ASSERT_FALSE(read_within(111, 2000ms));
  send(10);
  EXPECT_TRUE(read_within(120, 1000ms)) << "a quiet stream held its first bytes";
}

TEST_P(ReadBatching, reading_held_by_the_client_is_still_held_and_resumes_with_what_sat_below_the_mark) {
  connect(batching);
  send(100);
  ASSERT_TRUE(read_within(100, 1000ms));
  stream->set_reading(false);
  send(5000);  // past the mark, but the client asked for no reads
  EXPECT_FALSE(read_within(5100, 300ms)) << "read while the client held reading";
  stream->set_reading(true);
  EXPECT_TRUE(read_within(5100, 1000ms));
}

TEST_P(ReadBatching, without_batching_every_burst_is_read_at_once) {
  connect(std::nullopt);
  send(100);
  ASSERT_TRUE(read_within(100, 1000ms));
  send(10);
  EXPECT_TRUE(read_within(110, 1000ms));
}

TEST_P(ReadBatching, the_end_of_the_stream_is_seen_below_the_mark) {
  connect(batching);
  send(100);
  ASSERT_TRUE(read_within(100, 1000ms));
  ::close(peer);
  peer = -1;
  ASSERT_TRUE(loop.run_until([&] { return events.error.has_value(); }, 1000ms)) << "EOF held behind the mark";
  EXPECT_NE(events.error->to_string().find("closed the connection"), std::string::npos) << events.error->to_string();
}

// F9, not a bug: a backlog of two read buffers (64 KiB each) that sits whole in the receive
// queue while streaming is read at once, not one buffer per max_wait, on both drivers (Asio's
// reactor is edge-triggered, but a wait started on a socket that is already readable completes
// at once). The finding was made by reading the code; this is the case it described.
TEST_P(ReadBatching, a_backlog_of_two_read_buffers_is_read_at_once_not_one_buffer_per_max_wait) {
  connect(batching);
  send(100);
  ASSERT_TRUE(read_within(100, 1000ms));
  const std::string chunk(120 * 1024, 'x');
  const ssize_t n = ::send(peer, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ASSERT_GT(n, 64 * 1024) << "the backlog must be more than one read buffer";
  EXPECT_TRUE(read_within(100 + n, 1000ms)) << events.bytes - 100 << " of " << n << " bytes read in " << events.reads;
}

// F9: a mark above the read buffer could never be met by one read's worth of bytes; it is
// bounded by the buffer, so a full buffer's worth is read at once.
TEST_P(ReadBatching, a_min_bytes_above_the_read_buffer_is_bounded_by_it) {
  connect(client::ReadBatching{.min_bytes = 16 * 1024 * 1024, .max_wait = 1500ms});
  send(100);
  ASSERT_TRUE(read_within(100, 1000ms));
  send(70 * 1024);  // past one read buffer (64 KiB), far below the asked mark
  EXPECT_TRUE(read_within(100 + 64 * 1024, 1000ms)) << events.bytes << " bytes read";
}

// F9: a reset while bytes sit below the mark: they are read first (a broker's close with its
// reason, confirms), then the error is the reset, not what the poll reports (libuv says
// "bad file descriptor" for any POLLERR).
TEST_P(ReadBatching, a_reset_below_the_mark_reads_what_came_before_it_and_names_the_reset) {
  connect(batching);
  send(100);
  ASSERT_TRUE(read_within(100, 1000ms));
  send(200);  // streaming: below the mark, held
  const linger abort{.l_onoff = 1, .l_linger = 0};
  ASSERT_EQ(::setsockopt(peer, SOL_SOCKET, SO_LINGER, &abort, sizeof abort), 0);
  ::close(peer);  // RST
  peer = -1;
  ASSERT_TRUE(loop.run_until([&] { return events.error.has_value(); }, 1000ms)) << "the reset held behind the mark";
  EXPECT_EQ(events.bytes, 300u) << "what arrived before the reset was not read";
  EXPECT_NE(events.error->to_string().find("reset"), std::string::npos) << events.error->to_string();
}

// Issue 25: while the client says replies are owed (a deep confirm window), a read of a few
// bytes batches as a burst would: the next bytes below the mark are held. Told they are no
// longer owed, the stream reads what is held at once, well before max_wait, and so the next.
TEST_P(ReadBatching, while_replies_are_owed_small_reads_batch_and_the_held_bytes_come_once_they_are_not) {
  connect(client::ReadBatching{.min_bytes = 4096, .max_wait = 1500ms, .burst_bytes = 1000});
  stream->set_replies_owed(true);
  send(21);  // one confirm after a quiet spell: read at once
  ASSERT_TRUE(read_within(21, 1000ms));
  send(21);  // owed: that read started batching, so this one is held below the mark
  EXPECT_FALSE(read_within(42, 150ms)) << "read at once while replies are owed";
  const auto told = std::chrono::steady_clock::now();
  stream->set_replies_owed(false);
  ASSERT_TRUE(read_within(42, 5s)) << "the held bytes were never read";
  EXPECT_LT(std::chrono::steady_clock::now() - told, 1000ms) << "held until max_wait after replies were no longer owed";
  send(21);
  EXPECT_TRUE(read_within(63, 1000ms)) << "a quiet stream held its next bytes";
}

TEST_P(ReadBatching, without_batching_owed_replies_change_nothing) {
  connect(std::nullopt);
  stream->set_replies_owed(true);
  send(21);
  ASSERT_TRUE(read_within(21, 1000ms));
  send(21);
  EXPECT_TRUE(read_within(42, 1000ms)) << "held without batching";
}

// Issue 25: batching past bursts only (ClientOptions' default is of this kind). Reads that
// bring less than burst_bytes are read at once, as without batching; a read of a burst starts
// batching, reads of half a burst keep it, and the first read of less ends it.
constexpr client::ReadBatching past_bursts{.min_bytes = 4096, .max_wait = 1500ms, .burst_bytes = 1000};

TEST_P(ReadBatching, past_bursts_only_reads_that_bring_less_than_a_burst_are_read_at_once) {
  connect(past_bursts);
  for (std::size_t i = 1; i <= 5; ++i) {
    send(100);
    ASSERT_TRUE(read_within(100 * i, 1000ms)) << "read " << i << " was held, though no read brought a burst";
  }
}

TEST_P(ReadBatching, past_bursts_only_a_burst_starts_batching_and_the_next_read_below_a_burst_ends_it) {
  connect(past_bursts);
  send(2000);  // a burst: read at once (the stream was quiet), and batching starts
  ASSERT_TRUE(read_within(2000, 1000ms));
  send(100);  // below the mark: held until max_wait (and less than half a burst)
  ASSERT_NO_FATAL_FAILURE(expect_held_until_max_wait(2100, "read at once after a burst"));
  // That read brought 100 bytes, no burst: quiet again, so the next bytes are read at once.
  send(100);
  EXPECT_TRUE(read_within(2200, 1000ms)) << "batching went on after a read that was no burst";
}

TEST_P(ReadBatching, past_bursts_only_reads_of_half_a_burst_keep_batching) {
  connect(past_bursts);
  send(2000);
  ASSERT_TRUE(read_within(2000, 1000ms));
  send(600);  // half a burst and more, below the mark: held, then read by the timer ...
  ASSERT_FALSE(read_within(2600, 150ms));
  ASSERT_TRUE(read_within(2600, 10s));
  send(100);  // ... which kept batching going
  EXPECT_FALSE(read_within(2700, 150ms)) << "batching ended after a read of half a burst";
  EXPECT_TRUE(read_within(2700, 10s));
}

// Issue 37: bytes alone prove no burst. A read of burst_bytes that completed one delivery (a
// large message, a reply, a get) starts nothing: the next bytes are read at once.
TEST_P(ReadBatching, past_bursts_only_a_read_of_one_delivery_never_starts_batching) {
  connect(past_bursts);
  events.deliveries_per_read = 1;
  for (std::size_t i = 1; i <= 3; ++i) {
    send(2000);  // a burst's worth of bytes, one message
    ASSERT_TRUE(read_within(2000 * i, 1000ms)) << "read " << i << " waited for the timer after one large message";
  }
  send(100);
  EXPECT_TRUE(read_within(6100, 1000ms)) << "held after reads of one message each";
}

// Issue 37: while streaming, a backlog of several read buffers that built up while the client
// held its reading is read at once when reading resumes, not one buffer per max_wait (Asio's
// reactor is edge-triggered: the edge came while nobody was reading).
TEST_P(ReadBatching, a_backlog_built_while_reading_was_held_is_read_at_once_when_it_resumes) {
  connect(past_bursts);
  send(2000);  // a burst: streaming
  ASSERT_TRUE(read_within(2000, 1000ms));
  stream->set_reading(false);
  const std::string chunk(200 * 1024, 'x');
  const ssize_t n = ::send(peer, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ASSERT_GT(n, 2 * 64 * 1024) << "the backlog must be more than two read buffers";
  loop.run_until([] { return false; }, 100ms);  // the sender pauses; the edge is long gone
  stream->set_reading(true);
  EXPECT_TRUE(read_within(2000 + n, 1000ms)) << events.bytes - 2000 << " of " << n << " bytes read in " << events.reads;
}

INSTANTIATE_TEST_SUITE_P(Drivers, ReadBatching, ::testing::Values(DriverKind::uv, DriverKind::asio), driver_name);

}  // namespace
}  // namespace warren::test
