#include "warren/uv/uv_driver.hpp"

#include <cstring>
#include <string>

namespace warren::uv {
namespace {

Error uv_error(const std::string& what, int status) {
  Error e = make_error(errc::connection_lost, what + ": " + uv_strerror(status));
  e.code = std::error_code(-status, std::system_category());
  return e;
}

template <class Handle>
void close_and_free(Handle* h) {
  if (!h) return;
  uv_close(reinterpret_cast<uv_handle_t*>(h), [](uv_handle_t* x) { delete reinterpret_cast<Handle*>(x); });
}

// One TCP (or TLS) stream. The libuv handles outlive the object when needed: each is freed
// by its own close callback, and callbacks find the stream through a pointer that close()
// clears.
class UvStream final : public client::Stream {
 public:
  UvStream(uv_loop_t* loop, client::Endpoint endpoint, engine::Duration timeout, std::optional<tls::TlsOptions> tls,
           client::StreamEvents& events)
      : loop_(loop), endpoint_(std::move(endpoint)), events_(&events), read_buffer_(64 * 1024) {
    if (tls) {
      auto session = tls::TlsSession::client(*tls);
      if (!session.ok()) {
        fail_later(std::move(session).error());
        return;
      }
      tls_.emplace(std::move(session).value());
    }
    dial_timer_ = new uv_timer_t;
    uv_timer_init(loop_, dial_timer_);
    dial_timer_->data = this;
    uv_timer_start(dial_timer_, [](uv_timer_t* t) {
      auto* self = static_cast<UvStream*>(t->data);
      self->fail(make_error(errc::timeout, "connect " + self->where() + ": no connection within " +
                                               std::to_string(self->timeout_ms_) + " ms"));
    }, static_cast<std::uint64_t>(timeout.count()), 0);
    timeout_ms_ = timeout.count();
    resolver_ = new uv_getaddrinfo_t;
    resolver_->data = this;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    std::string port = std::to_string(endpoint_.port);
    int rc = uv_getaddrinfo(loop_, resolver_, &UvStream::on_resolved, endpoint_.host.c_str(), port.c_str(), &hints);
    if (rc != 0) {
      delete resolver_;
      resolver_ = nullptr;
      fail_later(uv_error("resolve " + endpoint_.host, rc));
    }
  }

  ~UvStream() override { close(); }

  void write(std::span<const std::span<const std::byte>> parts) override {
    if (!tcp_) return;
    if (tls_) {
      std::size_t total = 0;
      for (auto p : parts) {
        (void)tls_->write_plaintext(p);
        total += p.size();
      }
      plain_written_ = total;
      send_ciphertext();
      return;
    }
    bufs_.clear();
    for (auto p : parts) bufs_.push_back(uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(p.data())), static_cast<unsigned>(p.size())));
    auto* req = new uv_write_t;
    req->data = this;
    write_req_ = req;
    int rc = uv_write(req, reinterpret_cast<uv_stream_t*>(tcp_), bufs_.data(), static_cast<unsigned>(bufs_.size()),
                      [](uv_write_t* r, int status) {
                        auto* self = static_cast<UvStream*>(r->data);
                        delete r;
                        if (!self) return;
                        self->write_req_ = nullptr;
                        if (status < 0) return self->fail(uv_error("write " + self->where(), status));
                        std::size_t n = 0;
                        for (auto& b : self->bufs_) n += b.len;
                        self->events_->on_written(n);
                      });
    if (rc != 0) {
      delete req;
      write_req_ = nullptr;
      fail(uv_error("write " + where(), rc));
    }
  }

  void set_reading(bool reading) override {
    if (!tcp_ || !connected_) return;
    if (reading) start_reading();
    else uv_read_stop(reinterpret_cast<uv_stream_t*>(tcp_));
  }

  void close() override {
    events_ = nullptr;
    if (resolver_) {
      resolver_->data = nullptr;  // freed in its callback
      uv_cancel(reinterpret_cast<uv_req_t*>(resolver_));
      resolver_ = nullptr;
    }
    if (write_req_) write_req_->data = nullptr;
    if (tls_write_req_) tls_write_req_->data = nullptr;
    if (connect_req_) connect_req_->data = nullptr;
    close_and_free(dial_timer_);
    dial_timer_ = nullptr;
    close_and_free(tcp_);
    tcp_ = nullptr;
  }

 private:
  std::string where() const { return endpoint_.host + ":" + std::to_string(endpoint_.port); }

  void fail(Error e) {
    auto* events = events_;
    close();
    if (events) events->on_stream_error(std::move(e));
  }
  // An error found while the caller is still inside dial(): report it from the loop.
  void fail_later(Error e) {
    pending_error_ = std::move(e);
    dial_timer_ = new uv_timer_t;
    uv_timer_init(loop_, dial_timer_);
    dial_timer_->data = this;
    uv_timer_start(dial_timer_, [](uv_timer_t* t) {
      auto* self = static_cast<UvStream*>(t->data);
      self->fail(*self->pending_error_);
    }, 0, 0);
  }

  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
    auto* self = static_cast<UvStream*>(req->data);
    if (!self) {  // closed while resolving
      uv_freeaddrinfo(res);
      delete req;
      return;
    }
    self->resolver_ = nullptr;
    delete req;
    if (status < 0) {
      uv_freeaddrinfo(res);
      return self->fail(uv_error("resolve " + self->endpoint_.host, status));
    }
    self->tcp_ = new uv_tcp_t;
    uv_tcp_init(self->loop_, self->tcp_);
    self->tcp_->data = self;
    uv_tcp_nodelay(self->tcp_, 1);
    self->connect_req_ = new uv_connect_t;
    self->connect_req_->data = self;
    int rc = uv_tcp_connect(self->connect_req_, self->tcp_, res->ai_addr, &UvStream::on_tcp_connected);
    uv_freeaddrinfo(res);
    if (rc != 0) {
      delete self->connect_req_;
      self->connect_req_ = nullptr;
      self->fail(uv_error("connect " + self->where(), rc));
    }
  }

  static void on_tcp_connected(uv_connect_t* req, int status) {
    auto* self = static_cast<UvStream*>(req->data);
    delete req;
    if (!self) return;
    self->connect_req_ = nullptr;
    if (status < 0) return self->fail(uv_error("connect " + self->where(), status));
    self->start_reading();
    if (self->tls_) {
      self->send_ciphertext();  // the ClientHello; connected once the handshake is verified
      return;
    }
    self->connected();
  }

  void connected() {
    connected_ = true;
    close_and_free(dial_timer_);  // the dial is done: its timeout no longer applies
    dial_timer_ = nullptr;
    events_->on_connected();
  }

  void start_reading() {
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(tcp_),
        [](uv_handle_t* h, std::size_t, uv_buf_t* buf) {
          auto* self = static_cast<UvStream*>(h->data);
          *buf = uv_buf_init(reinterpret_cast<char*>(self->read_buffer_.data()), static_cast<unsigned>(self->read_buffer_.size()));
        },
        [](uv_stream_t* s, ssize_t n, const uv_buf_t*) {
          auto* self = static_cast<UvStream*>(s->data);
          if (!self || n == 0) return;
          if (n < 0) {
            return self->fail(n == UV_EOF ? make_error(errc::connection_lost, "the broker closed the connection")
                                          : uv_error("read " + self->where(), static_cast<int>(n)));
          }
          auto bytes = std::span<const std::byte>(self->read_buffer_.data(), static_cast<std::size_t>(n));
          if (!self->tls_) return self->events_->on_bytes(bytes);
          auto r = self->tls_->handle_ciphertext(bytes);
          if (!r.ok()) return self->fail(std::move(r).error());
          self->send_ciphertext();
          if (!self->connected_ && self->tls_->handshake_done()) {
            self->connected();
            if (!self->events_) return;
          }
          if (!self->tls_->plaintext().empty()) self->events_->on_bytes(self->tls_->plaintext());
        });
  }

  // TLS: hand OpenSSL's output to the socket; a plaintext write completes when its records do.
  void send_ciphertext() {
    if (!tcp_ || tls_write_req_) return;
    auto out = tls_->pending_ciphertext();
    if (out.empty()) {
      if (plain_written_ && events_) {
        std::size_t n = std::exchange(plain_written_, 0);
        events_->on_written(n);
      }
      return;
    }
    cipher_out_.assign(out.begin(), out.end());
    tls_->consume_ciphertext(out.size());
    auto* req = new uv_write_t;
    req->data = this;
    tls_write_req_ = req;
    uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(cipher_out_.data()), static_cast<unsigned>(cipher_out_.size()));
    int rc = uv_write(req, reinterpret_cast<uv_stream_t*>(tcp_), &buf, 1, [](uv_write_t* r, int status) {
      auto* self = static_cast<UvStream*>(r->data);
      delete r;
      if (!self) return;
      self->tls_write_req_ = nullptr;
      if (status < 0) return self->fail(uv_error("write " + self->where(), status));
      self->send_ciphertext();
    });
    if (rc != 0) {
      delete req;
      tls_write_req_ = nullptr;
      fail(uv_error("write " + where(), rc));
    }
  }

  uv_loop_t* loop_;
  client::Endpoint endpoint_;
  client::StreamEvents* events_;
  long long timeout_ms_ = 0;
  std::optional<tls::TlsSession> tls_;
  std::optional<Error> pending_error_;
  uv_timer_t* dial_timer_ = nullptr;
  uv_getaddrinfo_t* resolver_ = nullptr;
  uv_connect_t* connect_req_ = nullptr;
  uv_tcp_t* tcp_ = nullptr;
  uv_write_t* write_req_ = nullptr;
  uv_write_t* tls_write_req_ = nullptr;
  bool connected_ = false;
  std::vector<std::byte> read_buffer_;
  std::vector<uv_buf_t> bufs_;
  std::vector<std::byte> cipher_out_;
  std::size_t plain_written_ = 0;
};

class UvTimer final : public client::Timer {
 public:
  UvTimer(uv_loop_t* loop, std::function<void()> on_fire, bool keeps_alive) : on_fire_(std::move(on_fire)) {
    handle_ = new uv_timer_t;
    uv_timer_init(loop, handle_);
    handle_->data = this;
    // A heartbeat must not keep the program alive; a Session's retry must.
    if (!keeps_alive) uv_unref(reinterpret_cast<uv_handle_t*>(handle_));
  }
  ~UvTimer() override {
    handle_->data = nullptr;
    close_and_free(handle_);
  }
  void arm(engine::Instant at) override {
    auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(at - std::chrono::steady_clock::now()).count();
    uv_timer_start(handle_, [](uv_timer_t* t) {
      if (auto* self = static_cast<UvTimer*>(t->data)) self->on_fire_();
    }, static_cast<std::uint64_t>(std::max<long long>(delay, 0) + 1), 0);
  }
  void cancel() override { uv_timer_stop(handle_); }

 private:
  uv_timer_t* handle_;
  std::function<void()> on_fire_;
};

}  // namespace

UvDriver::UvDriver(uv_loop_t* loop) : loop_(loop), async_(new uv_async_t) {
  uv_async_init(loop_, async_, &UvDriver::on_async);
  async_->data = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(async_));  // posting is not a reason to stay alive
}

UvDriver::~UvDriver() {
  async_->data = nullptr;
  close_and_free(async_);
}

engine::Instant UvDriver::now() { return std::chrono::steady_clock::now(); }

std::unique_ptr<client::Stream> UvDriver::dial(const client::Endpoint& endpoint, engine::Duration timeout,
                                               std::optional<tls::TlsOptions> tls, client::StreamEvents& events) {
  return std::make_unique<UvStream>(loop_, endpoint, timeout, std::move(tls), events);
}

std::unique_ptr<client::Timer> UvDriver::timer(std::function<void()> on_fire) {
  return std::make_unique<UvTimer>(loop_, std::move(on_fire), false);
}

std::unique_ptr<client::Timer> UvDriver::keepalive_timer(std::function<void()> on_fire) {
  return std::make_unique<UvTimer>(loop_, std::move(on_fire), true);
}

void UvDriver::post(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    posted_.push_back(std::move(fn));
  }
  uv_async_send(async_);
}

void UvDriver::on_async(uv_async_t* handle) {
  auto* self = static_cast<UvDriver*>(handle->data);
  if (!self) return;
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(self->mutex_);
    run.swap(self->posted_);
  }
  for (auto& fn : run) fn();
}

}  // namespace warren::uv
