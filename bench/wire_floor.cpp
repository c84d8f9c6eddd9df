// The wire floor of the side-by-side benchmark (bench/compare.sh): the same three workloads with
// no client at all, to show what the kernel and the broker's pace cost any client on this
// machine. Frames are encoded once, before the measured phase, with warren's wire codec; the
// measured phase is raw bytes: large writes of pre-encoded publishes, large reads walked only
// for frame boundaries and the few fields the workload needs.
//   wire-floor --port P --queue Q --workload publish|confirm|consume --count N [--size B]
//              [--write-bytes W] [--read-bytes R] [--read-until short|eagain] [--stats 1]
// Q must exist (compare.sh declares it, with the same arguments for every client). Prints the
// same JSON line as rabbitmqc-perf and warren perf, CPU measured the same way.
//   publish: N messages without confirms, until the broker holds them (polled every 5 ms)
//   confirm: N messages with at most 1,000 unconfirmed in flight, topped up once 250 are free
//   consume: N messages already in Q, prefetch 500, a multiple ack every 100
// The socket is non-blocking in the measured phase and waits in poll(2): one descriptor, and
// poll takes the interest set with each call, so switching between "readable" and "readable or
// writable" costs no syscall (epoll would need an epoll_ctl each time, or edge-triggered
// EPOLLOUT and its spurious wake-ups); a poll on one descriptor costs what an epoll_wait does.
// A read that comes back short means the socket was empty (a level-triggered poll reports what
// arrives after it), so reading stops there without the extra read that would return EAGAIN
// (libuv does the same); --read-until eagain reads on until EAGAIN instead. A write that comes
// back short means the send buffer is full, so it is followed by a poll, not by a write that
// would return EAGAIN. The write and read sizes are options so they can be compared (writes
// of 64 KiB and more cost the same in W1, 16 KiB twice the CPU; reads of 16 to 256 KiB made
// no steady difference in W3: a wake-up finds some 2-4 KiB).
// --stats 1 prints the syscalls of the measured phase on standard error.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "perf_summary.hpp"
#include "process_usage.hpp"
#include "warren/wire/frame_writer.hpp"
#include "warren/wire/method.hpp"
#include "warren/wire/output_queue.hpp"

namespace {

using namespace warren::wire;
using warren::cli::cpu_seconds;
using Bytes = std::vector<std::byte>;

constexpr const char* usage =
    "--port P --queue Q --workload publish|confirm|consume --count N [--size B] [--write-bytes W] "
    "[--read-bytes R] [--read-until short|eagain] [--stats 1]";
constexpr std::uint32_t wanted_frame_max = 131072;
constexpr std::uint64_t window = 1000;          // W2: most publishes unconfirmed
constexpr std::uint64_t top_up_at = 750;        // W2: top the window up once a quarter is free
constexpr std::uint16_t prefetch = 500;         // W3
constexpr std::uint64_t ack_every = 100;        // W3

[[noreturn]] void die(const std::string& what, const std::string& why) {
  std::fprintf(stderr, "wire-floor: %s: %s\n", what.c_str(), why.c_str());
  std::exit(1);
}

std::uint16_t be16(const std::byte* p) {
  return static_cast<std::uint16_t>((std::to_integer<unsigned>(p[0]) << 8) | std::to_integer<unsigned>(p[1]));
}
std::uint32_t be32(const std::byte* p) {
  return (std::uint32_t{be16(p)} << 16) | be16(p + 2);
}
std::uint64_t be64(const std::byte* p) {
  return (std::uint64_t{be32(p)} << 32) | be32(p + 4);
}

// ---- Set-up: blocking, simple, with warren's codec (not measured) ----

template <class M>
Bytes method_frame(std::uint16_t channel, const M& method, std::uint32_t frame_max) {
  OutputQueue out;
  if (auto r = write_method(out, channel, method, frame_max); !r.ok()) die(std::string(M::name), r.error().to_string());
  return out.to_vector();
}

void write_all(int fd, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("write", std::strerror(errno));
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

void read_exact(int fd, std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) die("read", std::strerror(errno));
    if (r == 0) die("read", "the broker closed the connection");
    p += r;
    n -= static_cast<std::size_t>(r);
  }
}

struct Frame {
  std::uint8_t type = 0;
  std::uint16_t channel = 0;
  Bytes payload;
};

Frame read_frame(int fd) {
  std::byte header[7];
  read_exact(fd, header, sizeof header);
  Frame f{std::to_integer<std::uint8_t>(header[0]), be16(header + 1), {}};
  const std::uint32_t size = be32(header + 3);
  if (size > wanted_frame_max) die("read", "a frame of " + std::to_string(size) + " bytes");
  f.payload.resize(size + 1);
  read_exact(fd, f.payload.data(), f.payload.size());
  if (f.payload.back() != frame_end) die("read", "a frame without its end byte");
  f.payload.pop_back();
  return f;
}

// The next method frame, decoded; it must be an M. A close from the broker ends the program.
template <class M>
M expect(int fd, Frame& f) {
  for (;;) {
    f = read_frame(fd);
    if (f.type == 8) continue;  // heartbeat
    if (f.type != 1) die(std::string(M::name), "a frame of type " + std::to_string(f.type) + " instead");
    auto m = decode_method(f.payload);
    if (!m.ok()) die(std::string(M::name), m.error().to_string());
    if (auto* c = std::get_if<ConnectionClose>(&*m))
      die("connection.close from the broker", std::to_string(c->reply_code) + " " + std::string(c->reply_text));
    if (auto* c = std::get_if<ChannelClose>(&*m))
      die("channel.close from the broker", std::to_string(c->reply_code) + " " + std::string(c->reply_text));
    if (auto* ok = std::get_if<M>(&*m)) return *ok;
    die(std::string(M::name), std::string(method_name(*m)) + " instead");
  }
}

// ---- The measured phase: raw bytes on a non-blocking socket ----

// A close frame's reply code and text, from its raw payload.
[[noreturn]] void die_closed(const std::byte* p, std::uint32_t size) {
  const bool connection = be16(p) == 10;
  std::string text;
  std::uint16_t code = 0;
  if (size >= 7) {
    code = be16(p + 4);
    const std::size_t n = std::min<std::size_t>(std::to_integer<std::size_t>(p[6]), size - 7);
    text.assign(reinterpret_cast<const char*>(p + 7), n);
  }
  die(connection ? "connection.close from the broker" : "channel.close from the broker",
      std::to_string(code) + " " + text);
}

[[noreturn]] void die_unexpected(std::uint8_t type, const std::byte* p, std::uint32_t size) {
  if (type != 1 || size < 4) die("unexpected frame", "type " + std::to_string(type));
  const MethodId id{be16(p), be16(p + 2)};
  const auto name = method_name(id);
  die("unexpected method", name.empty() ? std::to_string(id.class_id) + "." + std::to_string(id.method_id)
                                        : std::string(name));
}

struct Io {
  int fd = -1;
  std::uint32_t frame_max = wanted_frame_max;
  bool until_eagain = false;
  // Read buffer: read_bytes for a read plus room for one incomplete frame carried over.
  Bytes in;
  std::size_t have = 0;
  // Syscalls of the measured phase.
  std::uint64_t reads = 0, reads_eagain = 0, writes = 0, writes_eagain = 0, writes_short = 0, polls = 0;
};

// Waits for the events asked for; POLLHUP counts as readable (the read says what happened).
short wait(Io& io, short events) {
  pollfd p{io.fd, events, 0};
  for (;;) {
    ++io.polls;
    const int r = ::poll(&p, 1, -1);
    if (r >= 0) break;
    if (errno != EINTR) die("poll", std::strerror(errno));
  }
  if (p.revents & (POLLERR | POLLNVAL)) die("poll", "socket error");
  if (p.revents & POLLHUP) p.revents |= POLLIN;
  return p.revents;
}

// Writes what the socket takes now: the bytes written, 0 when it takes none.
std::size_t write_some(Io& io, const std::byte* p, std::size_t n) {
  for (;;) {
    ++io.writes;
    const ssize_t r = ::write(io.fd, p, n);
    if (r >= 0) {
      if (static_cast<std::size_t>(r) < n) ++io.writes_short;
      return static_cast<std::size_t>(r);
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ++io.writes_eagain;
      return 0;
    }
    if (errno != EINTR) die("write", std::strerror(errno));
  }
}

// Hands each complete frame in the buffer to on_frame(type, payload, size), skipping
// heartbeats and stopping the program on a close; keeps an incomplete frame for the next read.
template <class F>
void walk(Io& io, F& on_frame) {
  const std::byte* p = io.in.data();
  std::size_t left = io.have;
  while (left >= frame_header_bytes) {
    const std::uint32_t size = be32(p + 3);
    if (size > io.frame_max) die("read", "a frame of " + std::to_string(size) + " bytes, over frame_max");
    if (left < size + frame_overhead_bytes) break;
    if (p[frame_header_bytes + size] != frame_end) die("read", "a frame without its end byte");
    const auto type = std::to_integer<std::uint8_t>(p[0]);
    const std::byte* payload = p + frame_header_bytes;
    if (type == 1 && size >= 4) {
      const std::uint32_t key = be32(payload);
      if (key == ((10u << 16) | 50u) || key == ((20u << 16) | 40u)) die_closed(payload, size);
    }
    if (type != 8) on_frame(type, payload, size);
    p += size + frame_overhead_bytes;
    left -= size + frame_overhead_bytes;
  }
  if (left > 0 && p != io.in.data()) std::memmove(io.in.data(), p, left);
  io.have = left;
}

// Reads until a read comes back short (or EAGAIN with --read-until eagain), walking the
// frames after each read.
template <class F>
void read_frames(Io& io, F&& on_frame) {
  for (;;) {
    const std::size_t want = io.in.size() - io.have;
    ++io.reads;
    const ssize_t n = ::read(io.fd, io.in.data() + io.have, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        ++io.reads_eagain;
        return;
      }
      die("read", std::strerror(errno));
    }
    if (n == 0) die("read", "the broker closed the connection");
    io.have += static_cast<std::size_t>(n);
    walk(io, on_frame);
    if (!io.until_eagain && static_cast<std::size_t>(n) < want) return;
  }
}

// Writes all of [p, p + n), waiting for room as needed and handing what arrives meanwhile to
// on_frame (small writes off the hot path).
template <class F>
void write_fully(Io& io, const std::byte* p, std::size_t n, F&& on_frame) {
  while (n > 0) {
    const std::size_t w = write_some(io, p, n);
    p += w;
    n -= w;
    if (n > 0 && (wait(io, POLLOUT | POLLIN) & POLLIN)) read_frames(io, on_frame);
  }
}

// Publishes all alike, written from `buffer` (2 * run bytes: whole publishes, twice over) as
// a stream: position p of the stream is buffer[p % run]. write() goes on until the socket
// takes less than it was offered; then `writable` waits for a poll's POLLOUT.
struct PublishStream {
  Bytes buffer;
  std::size_t run = 0;
  std::uint64_t pos = 0, end = 0;  // written so far, to write in all
  bool writable = true;

  [[nodiscard]] bool pending() const { return pos < end; }
  void write(Io& io) {
    while (writable && pos < end) {
      const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(run, end - pos));
      const std::size_t n = write_some(io, buffer.data() + pos % run, len);
      pos += n;
      if (n < len) writable = false;
    }
  }
};

// A passive queue.declare and its answer: the queue's depth.
std::uint32_t queue_depth(Io& io, const Bytes& declare) {
  bool answered = false;
  std::uint32_t depth = 0;
  auto on_frame = [&](std::uint8_t type, const std::byte* p, std::uint32_t size) {
    if (type == 1 && size >= 5 && be32(p) == ((50u << 16) | 11u) && !answered) {
      const std::size_t name = std::to_integer<std::size_t>(p[4]);
      if (size < 5 + name + 8) die("queue.declare-ok", "too short");
      depth = be32(p + 5 + name);
      answered = true;
      return;
    }
    die_unexpected(type, p, size);
  };
  write_fully(io, declare.data(), declare.size(), on_frame);
  while (!answered) {
    wait(io, POLLIN);
    read_frames(io, on_frame);
  }
  return depth;
}

struct Args {
  int port = 5672;
  std::string queue, workload;
  std::uint64_t count = 0;
  std::size_t size = 64;
  std::size_t write_bytes = 128 * 1024;  // W1: the size of each write
  std::size_t read_bytes = 64 * 1024;    // the size of each read
  bool until_eagain = false;
  bool stats = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) die("usage", usage);
    const char* v = argv[i + 1];
    if (k == "--port") a.port = std::atoi(v);
    else if (k == "--queue") a.queue = v;
    else if (k == "--workload") a.workload = v;
    else if (k == "--count") a.count = std::strtoull(v, nullptr, 10);
    else if (k == "--size") a.size = std::strtoull(v, nullptr, 10);
    else if (k == "--write-bytes") a.write_bytes = std::strtoull(v, nullptr, 10);
    else if (k == "--read-bytes") a.read_bytes = std::strtoull(v, nullptr, 10);
    else if (k == "--read-until") a.until_eagain = std::string(v) == "eagain";
    else if (k == "--stats") a.stats = std::atoi(v) != 0;
    else die("usage", usage);
  }
  if (a.queue.empty() || a.queue.size() > 255 || a.count == 0 || a.read_bytes < 4096 || a.write_bytes == 0 ||
      (a.workload != "publish" && a.workload != "confirm" && a.workload != "consume"))
    die("usage", usage);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  std::signal(SIGPIPE, SIG_IGN);

  // Connect and shake hands: blocking, frame by frame.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(args.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) die("connect", std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  write_all(fd, protocol_header);
  Frame f;
  const auto start_method = expect<ConnectionStart>(fd, f);
  if (std::string_view(start_method.mechanisms).find("PLAIN") == std::string_view::npos)
    die("connection.start", "the broker does not offer PLAIN");
  using namespace std::string_view_literals;
  write_all(fd, method_frame(0, ConnectionStartOk{.mechanism = "PLAIN", .response = "\0guest\0guest"sv, .locale = "en_US"},
                             min_frame_max_bytes));
  const auto tune = expect<ConnectionTune>(fd, f);
  const std::uint32_t frame_max =
      tune.frame_max == 0 ? wanted_frame_max : std::min(tune.frame_max, wanted_frame_max);
  write_all(fd, method_frame(0, ConnectionTuneOk{.channel_max = tune.channel_max, .frame_max = frame_max, .heartbeat = 0},
                             min_frame_max_bytes));
  write_all(fd, method_frame(0, ConnectionOpen{.virtual_host = "/"}, frame_max));
  expect<ConnectionOpenOk>(fd, f);
  write_all(fd, method_frame(1, ChannelOpen{}, frame_max));
  expect<ChannelOpenOk>(fd, f);
  const Bytes declare = method_frame(1, QueueDeclare{.queue = args.queue, .passive = true}, frame_max);
  write_all(fd, declare);
  const std::uint32_t initial = expect<QueueDeclareOk>(fd, f).message_count;
  if (args.workload == "confirm") {
    write_all(fd, method_frame(1, ConfirmSelect{}, frame_max));
    expect<ConfirmSelectOk>(fd, f);
  }
  if (args.workload == "consume") {
    write_all(fd, method_frame(1, BasicQos{.prefetch_count = prefetch}, frame_max));
    expect<BasicQosOk>(fd, f);
    write_all(fd, method_frame(1, BasicConsume{.queue = args.queue}, frame_max));
    expect<BasicConsumeOk>(fd, f);
  }

  // One publish (method, header without properties, body of 'c's), encoded once.
  const std::string body(args.size, 'c');
  Bytes publish;
  {
    OutputQueue out;
    if (auto r = write_content(out, 1, BasicPublish{.exchange = "", .routing_key = args.queue}, BasicProperties{},
                               std::as_bytes(std::span{body.data(), body.size()}), frame_max);
        !r.ok())
      die("basic.publish", r.error().to_string());
    publish = out.to_vector();
  }
  const std::size_t m = publish.size();
  auto replicate = [&](std::uint64_t copies) {
    Bytes out;
    out.reserve(copies * m);
    for (std::uint64_t i = 0; i < copies; ++i) out.insert(out.end(), publish.begin(), publish.end());
    return out;
  };
  // The ack template of W3; the delivery tag is patched in (after type, channel, size, class
  // and method ids).
  Bytes ack_frame = method_frame(1, BasicAck{.delivery_tag = 0, .multiple = true}, frame_max);
  constexpr std::size_t ack_tag_at = frame_header_bytes + method_header_bytes;
  const Bytes close = method_frame(0, ConnectionClose{.reply_code = 200, .reply_text = "bye"}, frame_max);

  Io io;
  io.fd = fd;
  io.frame_max = frame_max;
  io.until_eagain = args.until_eagain;
  io.in.resize(args.read_bytes + frame_max + frame_overhead_bytes);
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) die("fcntl", std::strerror(errno));

  std::uint64_t sent = 0, confirmed = 0, received = 0;
  // W1 and W2 write from one buffer of K publishes, twice over (K * m about --write-bytes; W2:
  // at most the window). The publishes are all alike, so the stream's byte at position p is
  // the buffer's byte at p mod K * m, and a write of up to K * m bytes can start anywhere in
  // the first K: every write asks for the full size, and a batch of up to K goes in one write.
  PublishStream out;
  if (args.workload != "consume") {
    const std::uint64_t cap = args.workload == "publish" ? args.count : std::min(window, args.count);
    const std::uint64_t k = std::min<std::uint64_t>(std::max<std::size_t>(1, args.write_bytes / m), cap);
    out.buffer = replicate(2 * k);
    out.run = static_cast<std::size_t>(k) * m;
  }

  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  auto refuse = [](std::uint8_t type, const std::byte* p, std::uint32_t size) { die_unexpected(type, p, size); };

  if (args.workload == "publish") {
    out.end = args.count * m;
    for (;;) {
      out.write(io);
      if (!out.pending()) break;
      // The send buffer is full: wait for room (and stop on anything the broker says).
      const short ready = wait(io, POLLOUT | POLLIN);
      if (ready & POLLOUT) out.writable = true;
      if (ready & POLLIN) read_frames(io, refuse);
    }
    sent = args.count;
    // Polled every 5 ms, as warren perf and rabbitmqc-perf do.
    while (queue_depth(io, declare) < initial + sent) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } else if (args.workload == "confirm") {
    auto on_frame = [&](std::uint8_t type, const std::byte* p, std::uint32_t size) {
      if (type == 1 && size >= 13) {
        const std::uint32_t key = be32(p);
        if (key == ((60u << 16) | 80u)) {  // basic.ack: tag, multiple; in order on one channel
          const std::uint64_t tag = be64(p + 4);
          if (tag > sent) die("basic.ack", "a tag never published");
          confirmed = std::max(confirmed, tag);
          return;
        }
        if (key == ((60u << 16) | 120u)) die("publish", "nacked (delivery tag " + std::to_string(be64(p + 4)) + ")");
      }
      die_unexpected(type, p, size);
    };
    while (confirmed < args.count) {
      // Top the window up, in one batch, once a quarter of it is free and the last batch is
      // written (rabbitmqc-perf and warren perf: when 1,000 are in flight, wait until <= 750).
      if (!out.pending() && sent < args.count && sent - confirmed <= top_up_at) {
        const std::uint64_t n = std::min(window - (sent - confirmed), args.count - sent);
        sent += n;
        out.end += n * m;
      }
      out.write(io);
      const short ready = wait(io, static_cast<short>(POLLIN | (out.pending() ? POLLOUT : 0)));
      if (ready & POLLOUT) out.writable = true;
      if (ready & POLLIN) read_frames(io, on_frame);
    }
  } else {
    Bytes acks;  // the acks due after this wake-up's reads, written at once
    acks.reserve(64 * ack_frame.size());
    std::size_t acks_at = 0;
    auto on_frame = [&](std::uint8_t type, const std::byte* p, std::uint32_t size) {
      if (type == 1) {
        if (size >= 5 && be32(p) == ((60u << 16) | 60u)) {  // basic.deliver
          const std::size_t tag_at = 5 + std::to_integer<std::size_t>(p[4]);  // after the consumer tag
          if (size < tag_at + 8) die("basic.deliver", "too short");
          if (received == args.count) return;  // more than asked for: left unacked
          ++received;
          if (received % ack_every == 0 || received == args.count) {
            std::memcpy(ack_frame.data() + ack_tag_at, p + tag_at, 8);
            acks.insert(acks.end(), ack_frame.begin(), ack_frame.end());
          }
          return;
        }
        die_unexpected(type, p, size);
      }
      if (type != 2 && type != 3) die_unexpected(type, p, size);  // header and body: skipped
    };
    bool writable = true;
    while (received < args.count || acks_at < acks.size()) {
      const short ready = wait(io, static_cast<short>((received < args.count ? POLLIN : 0) |
                                                      (acks_at < acks.size() ? POLLOUT : 0)));
      if (ready & POLLOUT) writable = true;
      if ((ready & POLLIN) && received < args.count) read_frames(io, on_frame);
      if (acks_at < acks.size() && writable) {
        const std::size_t n = write_some(io, acks.data() + acks_at, acks.size() - acks_at);
        acks_at += n;
        if (acks_at == acks.size()) {
          acks.clear();
          acks_at = 0;
        } else {
          writable = false;  // full: wait for room
        }
      }
    }
  }

  warren::bench::print_summary(sent, confirmed, received, start, cpu_start);
  if (args.stats)
    std::fprintf(stderr,
                 "wire-floor: measured phase: %llu reads (%llu EAGAIN), %llu writes (%llu short, %llu EAGAIN), "
                 "%llu polls%s\n",
                 static_cast<unsigned long long>(io.reads), static_cast<unsigned long long>(io.reads_eagain),
                 static_cast<unsigned long long>(io.writes), static_cast<unsigned long long>(io.writes_short),
                 static_cast<unsigned long long>(io.writes_eagain), static_cast<unsigned long long>(io.polls),
                 out.run ? ("; publish " + std::to_string(m) + " bytes, " + std::to_string(out.run / m) +
                            " a write at most").c_str()
                         : "");

  // Close: connection.close, then everything up to close-ok is skipped (deliveries past N).
  bool closed = false;
  auto until_close_ok = [&](std::uint8_t type, const std::byte* p, std::uint32_t size) {
    if (type == 1 && size >= 4 && be32(p) == ((10u << 16) | 51u)) closed = true;
  };
  write_fully(io, close.data(), close.size(), until_close_ok);
  while (!closed) {
    wait(io, POLLIN);
    read_frames(io, until_close_ok);
  }
  ::close(fd);
  return 0;
}
