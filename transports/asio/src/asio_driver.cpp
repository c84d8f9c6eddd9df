#include "warren/asio/asio_driver.hpp"

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include <memory>
#include <span>
#include <string>
#include <vector>

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
      : resolver(io), socket(io), dial_timer(io), endpoint(std::move(ep)), events(&ev), read_buffer(64 * 1024) {}

  tcp::resolver resolver;
  tcp::socket socket;
  asio::steady_timer dial_timer;
  client::Endpoint endpoint;
  client::StreamEvents* events;
  std::optional<tls::TlsSession> tls;
  std::vector<std::byte> read_buffer;
  std::vector<std::byte> cipher_out;
  std::vector<asio::const_buffer> write_buffers;  // the write in flight's parts
  std::size_t plain_written = 0;
  bool connected = false;
  bool reading = false;
  bool want_reading = true;
  bool tls_writing = false;

  std::string where() const { return endpoint.host + ":" + std::to_string(endpoint.port); }

  void close() {
    events = nullptr;
    std::error_code ignored;
    resolver.cancel();
    dial_timer.cancel();
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
                             asio::async_connect(self->socket, results, [self](const std::error_code& ec, const tcp::endpoint&) {
                               if (!self->events) return;
                               if (ec) return self->fail(net_error("connect " + self->where(), ec));
                               std::error_code ignored;
                               self->socket.set_option(tcp::no_delay(true), ignored);
                               self->read();
                               if (self->tls) return self->send_ciphertext();  // ClientHello first
                               self->on_connected();
                             });
                           });
  }

  void on_connected() {
    connected = true;
    dial_timer.cancel();
    events->on_connected();
  }

  void read() {
    if (reading || !want_reading || !events) return;
    reading = true;
    auto self = shared_from_this();
    socket.async_read_some(asio::buffer(read_buffer.data(), read_buffer.size()),
                           [self](const std::error_code& ec, std::size_t n) {
                             self->reading = false;
                             if (!self->events) return;
                             if (ec) {
                               return self->fail(ec == asio::error::eof
                                                     ? make_error(errc::connection_lost, "the broker closed the connection")
                                                     : net_error("read " + self->where(), ec));
                             }
                             self->on_read(std::span<const std::byte>(self->read_buffer.data(), n));
                             self->read();
                           });
  }

  void on_read(std::span<const std::byte> bytes) {
    if (!tls) return events->on_bytes(bytes);
    auto r = tls->handle_ciphertext(bytes);
    if (!r.ok()) return fail(std::move(r).error());
    send_ciphertext();
    if (!connected && tls->handshake_done()) {
      on_connected();
      if (!events) return;
    }
    if (!tls->plaintext().empty()) events->on_bytes(tls->plaintext());
  }

  void write(std::span<const std::span<const std::byte>> parts) {
    if (tls) {
      for (auto p : parts) {
        if (auto r = tls->write_plaintext(p); !r.ok()) {
          // A failed TLS write ends the stream; reported from the loop, since the caller is
          // still inside write().
          asio::post(socket.get_executor(), [self = shared_from_this(), e = std::move(r).error()] { self->fail(e); });
          return;
        }
        plain_written += p.size();
      }
      return send_ciphertext();
    }
    // One write at a time (the client waits for on_written): the buffer list is reused, and
    // passed as a span so async_write does not copy it. No allocation per write.
    write_buffers.clear();
    for (auto p : parts) write_buffers.emplace_back(p.data(), p.size());
    auto self = shared_from_this();
    asio::async_write(socket, std::span<const asio::const_buffer>(write_buffers), [self](const std::error_code& ec, std::size_t n) {
      if (!self->events) return;
      if (ec) return self->fail(net_error("write " + self->where(), ec));
      self->events->on_written(n);
    });
  }

  void send_ciphertext() {
    if (tls_writing || !events) return;
    auto out = tls->pending_ciphertext();
    if (out.empty()) {
      if (plain_written && events) events->on_written(std::exchange(plain_written, 0));
      return;
    }
    cipher_out.assign(out.begin(), out.end());
    tls->consume_ciphertext(out.size());
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
    if (reading && state_->connected) state_->read();
  }
  void close() override { state_->close(); }

 private:
  std::shared_ptr<State> state_;
};

class AsioTimer final : public client::Timer {
 public:
  AsioTimer(asio::io_context& io, std::function<void()> on_fire)
      : timer_(std::make_shared<asio::steady_timer>(io)), on_fire_(std::make_shared<std::function<void()>>(std::move(on_fire))) {}
  ~AsioTimer() override {
    *on_fire_ = nullptr;
    timer_->cancel();
  }
  void arm(engine::Instant at) override {
    timer_->expires_at(at);
    std::weak_ptr<std::function<void()>> fire = on_fire_;
    timer_->async_wait([fire](const std::error_code& ec) {
      if (ec) return;
      if (auto f = fire.lock(); f && *f) (*f)();
    });
  }
  void cancel() override { timer_->cancel(); }

 private:
  std::shared_ptr<asio::steady_timer> timer_;
  std::shared_ptr<std::function<void()>> on_fire_;
};

}  // namespace

engine::Instant AsioDriver::now() { return std::chrono::steady_clock::now(); }

std::unique_ptr<client::Stream> AsioDriver::dial(const client::Endpoint& endpoint, engine::Duration timeout,
                                                 std::optional<tls::TlsOptions> tls, client::StreamEvents& events) {
  auto state = std::make_shared<State>(io_, endpoint, events);
  if (tls) {
    auto session = tls::TlsSession::client(*tls);
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
