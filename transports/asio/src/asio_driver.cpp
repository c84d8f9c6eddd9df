#include "warren/asio/asio_driver.hpp"
#include "warren/client/read_buffer.hpp"
#include "warren/tls/tls_pump.hpp"

#include <asio/bind_allocator.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "warren/asio/operation_block.hpp"

namespace warren::asio_driver {
namespace {

using asio::ip::tcp;

// The system's text starts lower-case, as libuv's does, so both drivers read alike:
// "connect 127.0.0.1:5999: connection refused".
Error net_error(const std::string& what, const std::error_code& ec) {
  std::string why = ec.message();
  if (!why.empty() && why[0] >= 'A' && why[0] <= 'Z' && (why.size() < 2 || (why[1] >= 'a' && why[1] <= 'z')))
    why[0] = static_cast<char>(why[0] - 'A' + 'a');
  Error e = make_error(errc::connection_lost, what + ": " + why);
  e.code = ec;
  return e;
}

// The socket and its buffers live in a shared state that every pending handler holds, so a
// handler that completes after close() finds `events == nullptr` and does nothing.
struct State : std::enable_shared_from_this<State> {
  State(asio::io_context& io, client::Endpoint ep, client::StreamEvents& ev)
      : resolver(io), socket(io), dial_timer(io), batch_timer(io), endpoint(std::move(ep)), events(&ev) {}

  tcp::resolver resolver;
  tcp::socket socket;
  asio::steady_timer dial_timer;
  asio::steady_timer batch_timer;
  client::Endpoint endpoint;
  client::StreamEvents* events;
  std::optional<tls::TlsPump> tls;
  std::vector<std::byte> cipher_out;
  std::vector<asio::const_buffer> write_buffers;  // the write in flight's parts
  // The read's and the write's operations, reused: a busy connection allocates nothing.
  detail::OperationBlocks read_ops, write_ops;
  bool connected = false;
  bool reading = false;   // a wait for readiness is in flight
  bool handing_on = false;  // inside read_now(): it reads on while reading is wanted
  bool probe_posted = false;
  bool want_reading = true;
  bool tls_writing = false;
  // Read batching (client::ReadBatching); see read().
  client::ReadBatching batching;
  bool streaming = false;  // bytes keep coming: the mark is min_bytes, reads wait for it
  bool replies_owed = false;  // the client's word: any read that brings bytes is a burst
  std::size_t deliveries = 0;  // the client's word on the read being handed on: what it completed
  detail::OperationBlocks batch_ops;

  std::string where() const { return endpoint.host + ":" + std::to_string(endpoint.port); }

  void close() {
    events = nullptr;
    std::error_code ignored;
    resolver.cancel();
    dial_timer.cancel();
    batch_timer.cancel();
    socket.close(ignored);
  }
  void fail(Error e) {
    auto* ev = events;
    close();
    if (ev) ev->on_stream_error(std::move(e));
  }

  void start(engine::Duration timeout) {
    auto self = shared_from_this();
    dial_timer.expires_after(timeout);
    dial_timer.async_wait([self, timeout](const std::error_code& ec) {
      if (ec || !self->events || self->connected) return;
      self->fail(make_error(errc::timeout, "connect " + self->where() + ": no connection within " +
                                               std::to_string(timeout.count()) + " ms"));
    });
    resolver.async_resolve(endpoint.host, std::to_string(endpoint.port),
                           [self](const std::error_code& ec, tcp::resolver::results_type results) {
                             if (!self->events) return;
                             if (ec) return self->fail(net_error("resolve " + self->endpoint.host, ec));
                             self->connect(std::vector<tcp::endpoint>(results.begin(), results.end()), 0, {});
                           });
  }

  // Each resolved address in turn. The socket is made here, close-on-exec from its first
  // instant (Asio's own connect opens it without SOCK_CLOEXEC, and a child process the
  // application starts would inherit an authenticated connection to the broker).
  void connect(std::vector<tcp::endpoint> addresses, std::size_t next, std::error_code last) {
    if (next == addresses.size()) return fail(net_error("connect " + where(), last ? last : asio::error::host_not_found));
    const tcp::endpoint address = addresses[next];
    std::error_code ignored;
    socket.close(ignored);
    const int fd = ::socket(address.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    std::error_code ec;
    if (fd < 0) ec = std::error_code(errno, asio::error::get_system_category());
    else socket.assign(address.protocol(), fd, ec);
    if (ec) {
      if (fd >= 0) ::close(fd);
      return connect(std::move(addresses), next + 1, ec);
    }
    auto self = shared_from_this();
    socket.async_connect(address, [self, addresses = std::move(addresses), next](const std::error_code& ec) mutable {
      if (!self->events) return;
      if (ec) return self->connect(std::move(addresses), next + 1, ec);
      if (std::error_code again = self->register_for_reading(addresses[next].protocol()))
        return self->connect(std::move(addresses), next + 1, again);
      std::error_code ignored;
      self->socket.set_option(tcp::no_delay(true), ignored);
      self->socket.non_blocking(true, ignored);  // read_now()'s reads return what is there, never wait
      self->read();
      if (self->tls) return self->send_ciphertext();  // ClientHello first
      self->on_connected();
    });
  }

  // Asio's connect waits for writability, and its reactor keeps the socket registered for it
  // (EPOLLOUT) from then on. A socket is writable almost always, and Asio re-arms the
  // registration for every wait for readability, so each such wait would report it at once:
  // a wake-up of the loop for nothing after every read (an epoll_wait more per message on a
  // paced stream). Released and assigned again, the socket is registered for reading alone.
  // A write that later waits for room registers writability again, for good: a connection
  // whose writes have blocked keeps that wake-up.
  std::error_code register_for_reading(const tcp& protocol) {
    std::error_code ec;
    const int fd = socket.release(ec);
    if (ec) return ec;
    socket.assign(protocol, fd, ec);
    if (ec) ::close(fd);
    return ec;
  }

  void on_connected() {
    connected = true;
    dial_timer.cancel();
    events->on_connected();
  }

  // Reading: a wait for readiness, then non-blocking reads into the thread's buffer
  // (client::ReadBuffer) until one comes back short. No buffer is held while waiting: an
  // async_read_some would hold one per connection for as long as the connection is idle.
  // A short read drained the socket, and bytes that come after it make a new edge for the
  // next wait (Asio's reactor is edge-triggered, and one loop thread queues the wait before
  // it polls again). Where the chain starts again (reading wanted again, the connection
  // made), a read is tried first (probe()): bytes that came while no wait was in flight made
  // their edge already. While streaming with batching, the socket's SO_RCVLOWAT is min_bytes,
  // so the kernel signals readiness only at the mark; the batch timer reads what sits below
  // it max_wait after the last read, and a read that finds nothing means quiet again (the
  // mark back to one byte, which the kernel re-checks at once, so bytes already there are not
  // missed). The timer also covers an edge that came between a read and the next wait.
  void read() {
    if (reading || !want_reading || !events) return;
    reading = true;
    auto self = shared_from_this();
    socket.async_wait(tcp::socket::wait_read,
                      asio::bind_allocator(detail::OperationAllocator<void>(&read_ops), [self](const std::error_code& ec) {
                        self->reading = false;
                        if (!self->events) return;
                        if (ec) return self->fail(net_error("read " + self->where(), ec));
                        if (!self->want_reading) return;
                        self->read_now();
                        self->read();
                      }));
  }

  // Reading wanted again: what came meanwhile is read from the loop (never inside the
  // caller, which may be handing on a read of its own), then the wait goes on.
  void probe() {
    if (probe_posted || handing_on) return;  // read_now() reads on by itself
    probe_posted = true;
    asio::post(socket.get_executor(), [self = shared_from_this()] {
      self->probe_posted = false;
      if (!self->events || !self->want_reading || self->reading) return;
      self->read_now();
      self->read();
    });
  }

  Error read_error(const std::error_code& ec) const {
    return ec == asio::error::eof ? make_error(errc::connection_lost, "the broker closed the connection")
                                  : net_error("read " + where(), ec);
  }

  // Non-blocking reads while each fills the buffer: a backlog left after one read would get
  // no new edge when the sender pauses, and would wait for the next bytes (or drain one
  // buffer per max_wait).
  void read_now() {
    const client::ReadBuffer buffer;  // the thread's, for these reads only
    std::error_code ec;
    handing_on = true;
    for (;;) {
      const std::size_t n = socket.read_some(asio::buffer(buffer.data(), client::ReadBuffer::bytes), ec);
      if (ec) break;
      hand_on(std::span<const std::byte>(buffer.data(), n));
      if (!events || n < client::ReadBuffer::bytes || !want_reading) break;
    }
    handing_on = false;
    if (ec == asio::error::would_block || ec == asio::error::try_again) return batch_after_read(0);
    if (ec) fail(read_error(ec));
  }

  // Bytes read, handed on; then batching, by what the client said they completed.
  void hand_on(std::span<const std::byte> bytes) {
    deliveries = 0;
    on_read(bytes);
    if (events) batch_after_read(bytes.size());
  }

  bool batching_on() const { return batching.min_bytes > 0 && connected; }

  void set_mark(std::size_t bytes) {
    const int mark = static_cast<int>(std::min<std::size_t>(bytes, INT_MAX));
    (void)::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof mark);
  }

  // After a read of `found` bytes: a burst (burst_bytes or more that completed two deliveries
  // or more; any bytes when burst_bytes is 0, or while replies are owed) starts streaming, half
  // a burst keeps it; anything less ends it, and the next bytes are read at once.
  void batch_after_read(std::size_t found) {
    if (!batching_on()) return;
    // Half a burst keeps it going: a stream that bursts at about the rate that makes a
    // burst per max_wait would otherwise start and end batching on every other read.
    const std::size_t needed = streaming ? batching.burst_bytes / 2 : batching.burst_bytes;
    // Bytes alone prove nothing: one large message, or a reply, fills a read too, and nothing
    // says another follows. Deliveries do: two or more in one read are a stream in progress.
    const bool burst = found >= needed && (batching.burst_bytes == 0 || deliveries >= 2);
    if (found > 0 && (burst || replies_owed)) {
      if (!streaming) {
        streaming = true;
        // Never above one read buffer: a mark one read could not take would leave the bytes
        // below it to the timer, one buffer per max_wait.
        set_mark(std::min(batching.min_bytes, client::ReadBuffer::bytes));
      }
      wait_batch_timer();
    } else if (streaming) {
      end_streaming();
    }
  }

  // Quiet: the next bytes are read at once. A wait in flight for the mark completes as soon as
  // a byte is there (the kernel re-checks readiness when the mark is lowered).
  void end_streaming() {
    streaming = false;
    set_mark(1);
    batch_timer.cancel();
  }

  void set_replies_owed(bool owed) {
    replies_owed = owed;
    if (!owed && streaming && batching_on()) end_streaming();
  }

  // Re-armed after every read: moving the deadline replaces the wait in flight (which ends
  // as aborted), one timerfd update and no wake-up; a wait that ran on past the deadline and
  // was re-armed from its end would wake the loop every max_wait.
  void wait_batch_timer() {
    batch_timer.expires_after(batching.max_wait);
    auto self = shared_from_this();
    batch_timer.async_wait(asio::bind_allocator(detail::OperationAllocator<void>(&batch_ops), [self](const std::error_code& ec) {
      if (ec || !self->events || !self->streaming || !self->want_reading) return;
      self->read_now();
      if (self->events) self->read();
    }));
  }

  void on_read(std::span<const std::byte> bytes) {
    if (!tls) return events->on_bytes(bytes);
    auto r = tls->read(bytes);
    if (!r.ok()) return fail(std::move(r).error());
    send_ciphertext();
    if (r->verified_now) {
      on_connected();
      if (!events) return;
    }
    if (!r->plaintext.empty()) events->on_bytes(r->plaintext);
  }

  void write(std::span<const std::span<const std::byte>> parts) {
    if (tls) {
      if (auto r = tls->write(parts); !r.ok()) {
        // A failed TLS write ends the stream; reported from the loop, since the caller is
        // still inside write().
        asio::post(socket.get_executor(), [self = shared_from_this(), e = std::move(r).error()] { self->fail(e); });
        return;
      }
      return send_ciphertext();
    }
    // One write at a time (the client waits for on_written): the buffer list is reused, and
    // passed as a span so async_write does not copy it. No allocation per write.
    write_buffers.clear();
    for (auto p : parts) write_buffers.emplace_back(p.data(), p.size());
    auto self = shared_from_this();
    asio::async_write(socket, std::span<const asio::const_buffer>(write_buffers),
                      asio::bind_allocator(detail::OperationAllocator<void>(&write_ops),
                                           [self](const std::error_code& ec, std::size_t n) {
                                             if (!self->events) return;
                                             if (ec) return self->fail(net_error("write " + self->where(), ec));
                                             self->events->on_written(n);
                                           }));
  }

  void send_ciphertext() {
    if (tls_writing || !events) return;
    if (!tls->take_ciphertext(cipher_out)) {
      release_spent(cipher_out);  // all written
      if (const std::size_t done = tls->take_completed(); done > 0) events->on_written(done);
      return;
    }
    tls_writing = true;
    auto self = shared_from_this();
    asio::async_write(socket, asio::buffer(cipher_out.data(), cipher_out.size()),
                      [self](const std::error_code& ec, std::size_t) {
                        self->tls_writing = false;
                        if (!self->events) return;
                        if (ec) return self->fail(net_error("write " + self->where(), ec));
                        self->send_ciphertext();
                      });
  }
};

class AsioStream final : public client::Stream {
 public:
  explicit AsioStream(std::shared_ptr<State> state) : state_(std::move(state)) {}
  ~AsioStream() override { state_->close(); }
  void write(std::span<const std::span<const std::byte>> parts) override { state_->write(parts); }
  void set_reading(bool reading) override {
    state_->want_reading = reading;
    if (!reading || !state_->connected) return;
    state_->probe();
    // What sat below the mark while reading was held is read by the batch timer.
    if (state_->streaming) state_->wait_batch_timer();
  }
  void set_read_batching(client::ReadBatching batching) override { state_->batching = batching; }
  void set_replies_owed(bool owed) override { state_->set_replies_owed(owed); }
  void note_deliveries(std::size_t completed) override { state_->deliveries += completed; }
  void close() override { state_->close(); }

 private:
  std::shared_ptr<State> state_;
};

// The client re-arms its timer on every turn, mostly to a later deadline (a heartbeat moved
// on by traffic). A wait in flight that ends earlier than the new deadline is left alone and,
// when it ends, waits on to it: re-arming costs neither a cancelled operation nor a system
// call, and a busy connection allocates nothing for its timer. An earlier deadline replaces
// the wait; cancel() ends it, so a cancelled timer never keeps run() from returning.
class AsioTimer final : public client::Timer {
 public:
  AsioTimer(asio::io_context& io, std::function<void()> on_fire)
      : state_(std::make_shared<State>(io, std::move(on_fire))) {}
  ~AsioTimer() override {
    state_->on_fire = nullptr;
    cancel();
  }
  void arm(engine::Instant at) override {
    state_->deadline = at;
    if (state_->waiting_until && *state_->waiting_until <= at) return;  // it waits on when it ends
    wait(state_, at);
  }
  void cancel() override {
    state_->deadline.reset();
    state_->waiting_until.reset();
    ++state_->generation;
    state_->timer.cancel();
  }

 private:
  struct State {
    State(asio::io_context& io, std::function<void()> fn) : timer(io), on_fire(std::move(fn)) {}
    asio::steady_timer timer;
    std::function<void()> on_fire;
    std::optional<engine::Instant> deadline;       // armed for; nullopt: not armed
    std::optional<engine::Instant> waiting_until;  // the wait in flight
    std::uint64_t generation = 0;                  // a replaced or cancelled wait is stale
    detail::OperationBlocks ops;                   // the waits' memory
  };

  static void wait(const std::shared_ptr<State>& s, engine::Instant until) {
    s->waiting_until = until;
    const auto generation = ++s->generation;
    s->timer.expires_at(until);  // cancels the wait it replaces (stale by its generation)
    s->timer.async_wait(asio::bind_allocator(detail::OperationAllocator<void>(&s->ops),
                                             [s, generation](const std::error_code& ec) {
                                               if (ec || generation != s->generation) return;
                                               s->waiting_until.reset();
                                               if (!s->deadline) return;
                                               if (std::chrono::steady_clock::now() < *s->deadline) return wait(s, *s->deadline);
                                               s->deadline.reset();
                                               // A copy: the callback may destroy the timer.
                                               if (auto fire = s->on_fire) fire();
                                             }));
  }

  std::shared_ptr<State> state_;  // shared with the wait in flight
};

}  // namespace

engine::Instant AsioDriver::now() { return std::chrono::steady_clock::now(); }

std::unique_ptr<client::Stream> AsioDriver::dial(const client::Endpoint& endpoint, engine::Duration timeout,
                                                 std::optional<client::TlsSettings> tls, client::StreamEvents& events) {
  auto state = std::make_shared<State>(io_, endpoint, events);
  if (tls) {
    auto session = tls::TlsPump::client(tls::TlsOptions{tls->server_name, tls->ca_pem, tls->client_cert_pem, tls->client_key_pem});
    if (!session.ok()) {
      // Reported from the loop: the caller is still inside dial().
      asio::post(io_, [state, e = std::move(session).error()] { state->fail(e); });
      return std::make_unique<AsioStream>(state);
    }
    state->tls.emplace(std::move(session).value());
  }
  state->start(timeout);
  return std::make_unique<AsioStream>(state);
}

std::unique_ptr<client::Timer> AsioDriver::timer(std::function<void()> on_fire) {
  return std::make_unique<AsioTimer>(io_, std::move(on_fire));
}

void AsioDriver::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

}  // namespace warren::asio_driver
