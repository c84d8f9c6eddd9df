// The libuv stream: resolve, dial each address in turn, then read and write a socket we own
// through a uv_poll_t (see uv_stream.hpp for why not a uv_tcp_t). Every write uses
// sendmsg(MSG_NOSIGNAL); a completed write and an error found inside a call are reported from
// the loop (an idle handle), never from inside the caller's write().
#include "uv_stream.hpp"

#include "close_handle.hpp"
#include "warren/client/read_buffer.hpp"
#include "warren/tls/tls_pump.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

namespace warren::uv::detail {
namespace {

Error sys_error(const std::string& what, int sys_errno) {
  // libuv's error text is lower-case ("connection refused"), as the Asio driver's is.
  Error e = make_error(errc::connection_lost, what + ": " + uv_strerror(-sys_errno));
  e.code = std::error_code(sys_errno, std::system_category());
  return e;
}

// The poll handle and the socket it watches: the socket is closed once libuv is done with
// the handle, so the descriptor number cannot be reused under a live watcher.
struct Socket {
  uv_poll_t poll;
  int fd;
};

void close_socket(Socket* s) {
  if (!s) return;
  s->poll.data = nullptr;
  uv_poll_stop(&s->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&s->poll), [](uv_handle_t* h) {
    auto* sock = reinterpret_cast<Socket*>(h);  // poll is the first member
    ::close(sock->fd);
    delete sock;
  });
}

class UvStream final : public client::Stream {
 public:
  UvStream(uv_loop_t* loop, client::Endpoint endpoint, engine::Duration timeout, std::optional<client::TlsSettings> tls,
           client::StreamEvents& events)
      : loop_(loop), endpoint_(std::move(endpoint)), events_(&events), timeout_ms_(timeout.count()) {
    idle_ = new uv_idle_t;
    uv_idle_init(loop_, idle_);
    idle_->data = this;
    if (tls) {
      auto session = tls::TlsPump::client(tls::TlsOptions{tls->server_name, tls->ca_pem, tls->client_cert_pem, tls->client_key_pem});
      if (!session.ok()) {
        report_later(std::move(session).error());
        return;
      }
      tls_.emplace(std::move(session).value());
    }
    dial_timer_ = new uv_timer_t;
    uv_timer_init(loop_, dial_timer_);
    dial_timer_->data = this;
    uv_timer_start(dial_timer_, [](uv_timer_t* t) {
      auto* self = static_cast<UvStream*>(t->data);
      if (!self) return;
      self->fail(make_error(errc::timeout, "connect " + self->where() + ": no connection within " +
                                               std::to_string(self->timeout_ms_) + " ms"));
    }, static_cast<std::uint64_t>(timeout.count()), 0);
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
      report_later(sys_error("resolve " + endpoint_.host, -rc));
    }
  }

  ~UvStream() override { close(); }

  void write(std::span<const std::span<const std::byte>> parts) override {
    if (!socket_ || !events_) return;
    std::size_t total = 0;
    for (auto p : parts) total += p.size();
    if (tls_) {
      if (auto r = tls_->write(parts); !r.ok()) return report_later(std::move(r).error());
      send_ciphertext();
      return;
    }
    out_.clear();
    for (auto p : parts)
      if (!p.empty()) out_.push_back(iovec{const_cast<std::byte*>(p.data()), p.size()});
    out_next_ = 0;
    out_total_ = total;
    send_out();
  }

  void set_reading(bool reading) override {
    reading_ = reading;
    watch();
    if (reading_ && streaming_) arm_batch_timer();  // what sat below the mark while held
  }

  void set_read_batching(client::ReadBatching batching) override {
    batching_ = batching;
    if (batching_.min_bytes == 0 || batch_timer_) return;
    batch_timer_ = new uv_timer_t;
    uv_timer_init(loop_, batch_timer_);
    batch_timer_->data = this;
    uv_unref(reinterpret_cast<uv_handle_t*>(batch_timer_));  // the socket keeps the loop alive, not this
  }

  void note_deliveries(std::size_t completed) override { deliveries_ += completed; }

  void set_replies_owed(bool owed) override {
    replies_owed_ = owed;
    // No longer owed: what sits below the mark is read at once (lowering the mark makes the
    // kernel signal it), and so are the next bytes.
    if (!owed && streaming_ && batching() && socket_) end_streaming();
  }

  void close() override {
    events_ = nullptr;
    if (resolver_) {
      resolver_->data = nullptr;  // freed in its callback
      uv_cancel(reinterpret_cast<uv_req_t*>(resolver_));
      resolver_ = nullptr;
    }
    close_and_free(dial_timer_);
    dial_timer_ = nullptr;
    close_and_free(idle_);
    idle_ = nullptr;
    close_and_free(batch_timer_);
    batch_timer_ = nullptr;
    close_socket(socket_);
    socket_ = nullptr;
  }

 private:
  std::string where() const { return endpoint_.host + ":" + std::to_string(endpoint_.port); }

  void fail(Error e) {
    auto* events = events_;
    close();
    if (events) events->on_stream_error(std::move(e));
  }

  // An error found while the caller is still inside one of our calls: report it from the loop.
  void report_later(Error e) {
    if (!pending_error_) pending_error_ = std::move(e);
    wake();
  }
  void wake() {
    if (idle_ && !uv_is_active(reinterpret_cast<uv_handle_t*>(idle_))) uv_idle_start(idle_, &UvStream::on_idle);
  }
  static void on_idle(uv_idle_t* h) {
    auto* self = static_cast<UvStream*>(h->data);
    uv_idle_stop(h);
    if (!self || !self->events_) return;
    if (self->pending_error_) return self->fail(*self->pending_error_);
    if (self->written_ > 0) {
      std::size_t n = std::exchange(self->written_, 0);
      self->events_->on_written(n);
    }
  }

  // ---- dialling: every resolved address in turn, within the one deadline

  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
    auto* self = static_cast<UvStream*>(req->data);
    delete req;
    if (!self) {  // closed while resolving
      uv_freeaddrinfo(res);
      return;
    }
    self->resolver_ = nullptr;
    if (status < 0) {
      uv_freeaddrinfo(res);
      return self->fail(sys_error("resolve " + self->endpoint_.host, -status));
    }
    for (addrinfo* a = res; a; a = a->ai_next) {
      Address address{};
      std::memcpy(&address.storage, a->ai_addr, a->ai_addrlen);
      address.length = a->ai_addrlen;
      self->addresses_.push_back(address);
    }
    uv_freeaddrinfo(res);
    self->dial_next_address();
  }

  void dial_next_address() {
    while (next_address_ < addresses_.size()) {
      const Address& a = addresses_[next_address_++];
      int fd = ::socket(a.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
      if (fd < 0) {
        last_errno_ = errno;
        continue;
      }
      int one = 1;
      (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&a.storage), a.length) != 0 && errno != EINPROGRESS) {
        last_errno_ = errno;
        ::close(fd);
        continue;
      }
      socket_ = new Socket{};
      socket_->fd = fd;
      uv_poll_init_socket(loop_, &socket_->poll, fd);
      socket_->poll.data = this;
      dialling_ = true;
      watching_ = 0;
      watch();
      return;
    }
    fail(sys_error("connect " + where(), last_errno_ != 0 ? last_errno_ : ECONNREFUSED));
  }

  void on_tcp_connect_result() {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(socket_->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {  // this address refused or is unreachable: the next one
      last_errno_ = err;
      close_socket(socket_);
      socket_ = nullptr;
      return dial_next_address();
    }
    dialling_ = false;
    watch();
    if (tls_) {
      send_ciphertext();  // the ClientHello; connected once the handshake is verified
      return;
    }
    connected();
  }

  void connected() {
    connected_ = true;
    close_and_free(dial_timer_);  // the dial is done: its timeout no longer applies
    dial_timer_ = nullptr;
    watch();
    events_->on_connected();
  }

  // ---- the poll: readable while reading is wanted (always during a TLS handshake), writable
  // while connecting or while a write waits for room.

  void watch() {
    if (!socket_) return;
    int want = 0;
    if (dialling_ || !out_done()) want |= UV_WRITABLE;
    if (!dialling_ && (reading_ || !connected_)) want |= UV_READABLE;
    if (want == watching_) return;
    watching_ = want;
    if (want == 0) uv_poll_stop(&socket_->poll);
    else uv_poll_start(&socket_->poll, want, &UvStream::on_poll);
  }

  static void on_poll(uv_poll_t* h, int status, int events) {
    auto* self = static_cast<UvStream*>(h->data);
    if (!self) return;
    if (self->dialling_) return self->on_tcp_connect_result();
    if (status < 0) return self->drain_then_fail(status);
    if (events & UV_WRITABLE) {
      self->send_out();
      if (!h->data) return;  // failed, and closed
    }
    if (events & UV_READABLE) self->read_once();
  }

  // ---- read batching (client::ReadBatching): two states. Quiet: the mark is one byte, and
  // what comes is read at once. Streaming (after a read of a burst: burst_bytes or more that
  // the client says completed two deliveries or more; any bytes when burst_bytes is 0): the
  // mark is min_bytes, so the kernel wakes us only for that much, and a timer reads what is
  // below it max_wait after the last read. A read of less than half a burst (one that finds
  // nothing among them) means quiet again. While the client says replies are owed, any read
  // that brings bytes counts as a burst.

  bool batching() const { return batching_.min_bytes > 0 && connected_; }

  void set_mark(int bytes) {
    (void)::setsockopt(socket_->fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes);
  }

  void arm_batch_timer() {
    const auto us = batching_.max_wait.count();
    const auto ms = static_cast<std::uint64_t>(std::max<long long>(1, (us + 999) / 1000));
    uv_timer_start(batch_timer_, &UvStream::on_batch_timer, ms, 0);
  }

  static void on_batch_timer(uv_timer_t* t) {
    auto* self = static_cast<UvStream*>(t->data);
    if (!self || !self->socket_ || !self->events_ || !self->reading_) return;
    self->read_once();
  }

  // After a read of `found` bytes: a burst, so more are likely coming (streaming), or not
  // (quiet, and what comes next is read at once).
  void batch_after_read(std::size_t found) {
    if (!batching()) return;
    // Half a burst keeps it going: a stream that bursts at about the rate that makes a
    // burst per max_wait would otherwise start and end batching on every other read.
    const std::size_t needed = streaming_ ? batching_.burst_bytes / 2 : batching_.burst_bytes;
    // Bytes alone prove nothing: one large message, or a reply, fills a read too, and nothing
    // says another follows. Deliveries do: two or more in one read are a stream in progress.
    const bool burst = found >= needed && (batching_.burst_bytes == 0 || deliveries_ >= 2);
    if (found > 0 && (burst || replies_owed_)) {
      if (!streaming_) {
        streaming_ = true;
        set_mark(static_cast<int>(mark_bytes()));
      }
      arm_batch_timer();
    } else if (streaming_) {
      end_streaming();
    }
  }

  void end_streaming() {
    streaming_ = false;
    set_mark(1);
    uv_timer_stop(batch_timer_);
  }

  // The mark never exceeds one read buffer: a mark that one read could not take would leave
  // the bytes below it to the timer, one buffer per max_wait.
  std::size_t mark_bytes() const { return std::min({batching_.min_bytes, client::ReadBuffer::bytes, std::size_t{INT_MAX}}); }

  void read_once() {
    const client::ReadBuffer buffer;  // the thread's, for this read only
    ssize_t n = ::recv(socket_->fd, buffer.data(), client::ReadBuffer::bytes, 0);
    if (n == 0) return fail(make_error(errc::connection_lost, "the broker closed the connection"));
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return batch_after_read(0);
      return fail(sys_error("read " + where(), errno));
    }
    // Handed on first: the client says then what the bytes completed (note_deliveries).
    deliveries_ = 0;
    auto* witness = &socket_->poll;
    deliver(std::span<const std::byte>(buffer.data(), static_cast<std::size_t>(n)));
    if (!witness->data || !events_) return;  // closed meanwhile (and maybe gone)
    batch_after_read(static_cast<std::size_t>(n));
  }

  // Hands read bytes on (through TLS when there is one). The stream may be closed, and this
  // object gone, when it returns: callers check their witness (the socket's poll handle).
  void deliver(std::span<const std::byte> bytes) {
    if (!tls_) return events_->on_bytes(bytes);
    auto r = tls_->read(bytes);
    if (!r.ok()) return fail(std::move(r).error());
    auto* witness = &socket_->poll;
    send_ciphertext();
    if (!witness->data) return;
    if (r->verified_now) {
      connected();
      if (!witness->data) return;
    }
    if (!r->plaintext.empty()) events_->on_bytes(r->plaintext);
  }

  // The poll reported an error (libuv says UV_EBADF for any POLLERR, a reset among them). What
  // the kernel still holds is read first: a broker's close with its reason, or confirms, may
  // sit there below the mark. Then the cause is the socket's own error, named as it is.
  void drain_then_fail(int poll_status) {
    auto* witness = &socket_->poll;
    const client::ReadBuffer buffer;
    for (;;) {
      const ssize_t n = ::recv(socket_->fd, buffer.data(), client::ReadBuffer::bytes, 0);
      if (n == 0) return fail(make_error(errc::connection_lost, "the broker closed the connection"));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return fail(sys_error("read " + where(), errno));
        break;
      }
      deliver(std::span<const std::byte>(buffer.data(), static_cast<std::size_t>(n)));
      if (!witness->data || !events_) return;
    }
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(socket_->fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error != 0)
      return fail(sys_error("read " + where(), error));
    fail(sys_error("poll " + where(), -poll_status));
  }

  // ---- writing: one gathered write at a time, resumed when the socket has room

  bool out_done() const { return out_next_ >= out_.size(); }

  void send_out() {
    while (!out_done()) {
      msghdr msg{};
      msg.msg_iov = out_.data() + out_next_;
      msg.msg_iovlen = std::min<std::size_t>(out_.size() - out_next_, IOV_MAX);
      ssize_t n = ::sendmsg(socket_->fd, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        out_.clear();
        out_next_ = 0;
        return report_later(sys_error("write " + where(), errno));
      }
      auto left = static_cast<std::size_t>(n);
      while (left > 0 && !out_done()) {
        iovec& v = out_[out_next_];
        std::size_t take = std::min(left, v.iov_len);
        v.iov_base = static_cast<std::byte*>(v.iov_base) + take;
        v.iov_len -= take;
        left -= take;
        if (v.iov_len == 0) ++out_next_;
      }
    }
    watch();
    if (!out_done()) return;
    out_.clear();
    out_next_ = 0;
    if (tls_) {
      send_ciphertext();  // more records may have been queued meanwhile
      return;
    }
    written_ += std::exchange(out_total_, 0);
    wake();
  }

  // TLS: hand OpenSSL's output to the socket; a plaintext write completes when its records do.
  void send_ciphertext() {
    if (!socket_ || !out_done()) return;
    if (!tls_->take_ciphertext(cipher_out_)) {
      release_spent(cipher_out_);  // all written
      if (const std::size_t done = tls_->take_completed(); done > 0) {
        written_ += done;
        wake();
      }
      return;
    }
    out_.assign(1, iovec{cipher_out_.data(), cipher_out_.size()});
    out_next_ = 0;
    send_out();
  }

  struct Address {
    sockaddr_storage storage;
    socklen_t length;
  };

  uv_loop_t* loop_;
  client::Endpoint endpoint_;
  client::StreamEvents* events_;
  long long timeout_ms_;
  std::optional<tls::TlsPump> tls_;
  std::optional<Error> pending_error_;
  uv_timer_t* dial_timer_ = nullptr;
  uv_idle_t* idle_ = nullptr;
  uv_timer_t* batch_timer_ = nullptr;
  client::ReadBatching batching_;
  bool streaming_ = false;  // batching: bytes keep coming, the mark is min_bytes
  bool replies_owed_ = false;  // the client's word: any read that brings bytes is a burst
  std::size_t deliveries_ = 0;  // the client's word on the read being handed on: what it completed
  uv_getaddrinfo_t* resolver_ = nullptr;
  std::vector<Address> addresses_;
  std::size_t next_address_ = 0;
  int last_errno_ = 0;
  Socket* socket_ = nullptr;
  int watching_ = 0;
  bool dialling_ = false;
  bool connected_ = false;
  bool reading_ = true;
  std::vector<iovec> out_;  // the write in progress: what is left of it from out_next_ on
  std::size_t out_next_ = 0;
  std::size_t out_total_ = 0;
  std::size_t written_ = 0;  // bytes written, to report from the loop
  std::vector<std::byte> cipher_out_;
};

}  // namespace

std::unique_ptr<client::Stream> dial_stream(uv_loop_t* loop, const client::Endpoint& endpoint,
                                            engine::Duration timeout, std::optional<client::TlsSettings> tls,
                                            client::StreamEvents& events) {
  return std::make_unique<UvStream>(loop, endpoint, timeout, std::move(tls), events);
}

}  // namespace warren::uv::detail
