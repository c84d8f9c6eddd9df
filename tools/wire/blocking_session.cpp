#include "blocking_session.hpp"

#include "warren/engine/negotiate.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace warren::tools {
namespace {

Error system_error(const std::string& what) {
  return Error{std::error_code(errno, std::system_category()), what + ": " + std::strerror(errno)};
}

}  // namespace

BlockingSession::BlockingSession(int fd, std::chrono::milliseconds timeout)
    : fd_(fd), timeout_(timeout), read_buffer_(64 * 1024) {}

BlockingSession::BlockingSession(BlockingSession&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      timeout_(other.timeout_),
      decoder_(std::move(other.decoder_)),
      out_(std::move(other.out_)),
      read_buffer_(std::move(other.read_buffer_)),
      frame_max_(other.frame_max_),
      handshake_(std::move(other.handshake_)),
      bytes_received_(other.bytes_received_),
      frames_received_(other.frames_received_) {}

BlockingSession::~BlockingSession() {
  if (fd_ >= 0) ::close(fd_);
}

Result<BlockingSession> BlockingSession::connect(const SessionOptions& options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string port = std::to_string(options.port);
  if (int rc = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return make_error(errc::connection_lost, "resolve " + options.host + ": " + ::gai_strerror(rc));
  int fd = -1;
  Error last = make_error(errc::connection_lost, "no address for " + options.host);
  for (addrinfo* a = found; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    last = system_error("connect " + options.host + ":" + port);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) return last;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  BlockingSession s(fd, options.receive_timeout);
  if (auto r = s.run_handshake(options); !r.ok()) return std::move(r).error();
  return s;
}

Result<void> BlockingSession::run_handshake(const SessionOptions& options) {
  wire::write_protocol_header(out_);
  if (auto r = flush(); !r.ok()) return r;

  auto start = receive_method(0);
  if (!start.ok()) return std::move(start).error();
  auto* s = std::get_if<wire::ConnectionStart>(&*start);
  if (!s) return make_error(errc::protocol_error, "expected connection.start, got " + std::string(wire::method_name(*start)));
  auto props = s->server_properties.to_table();
  if (!props.ok()) return std::move(props).error();
  handshake_.server_properties = std::move(*props);
  handshake_.mechanisms = std::string(s->mechanisms);
  handshake_.locales = std::string(s->locales);

  engine::ConnectionOptions engine_options;
  engine_options.user = options.user;
  engine_options.password = options.password;
  const wire::FieldTable client = engine::client_properties(engine_options);
  const std::string response = engine::sasl_response(engine_options);
  if (auto r = send(0, wire::ConnectionStartOk{client, "PLAIN", response, "en_US"}); !r.ok()) return r;

  auto tune = receive_method(0);
  if (!tune.ok()) return std::move(tune).error();
  auto* t = std::get_if<wire::ConnectionTune>(&*tune);
  if (!t) return make_error(errc::protocol_error, "expected connection.tune, got " + std::string(wire::method_name(*tune)));
  handshake_.tune = *t;
  // No heartbeats here (nothing would send them); take the broker's limits as they are.
  handshake_.agreed = wire::ConnectionTuneOk{t->channel_max, t->frame_max, 0};
  if (auto r = send(0, handshake_.agreed); !r.ok()) return r;
  frame_max_ = t->frame_max;
  decoder_.set_frame_max(t->frame_max);

  if (auto r = send(0, wire::ConnectionOpen{options.vhost}); !r.ok()) return r;
  auto open = receive_method(0);
  if (!open.ok()) return std::move(open).error();
  if (!std::holds_alternative<wire::ConnectionOpenOk>(*open))
    return make_error(errc::protocol_error, "expected connection.open-ok, got " + std::string(wire::method_name(*open)));
  return {};
}

Result<void> BlockingSession::send(std::uint16_t channel, const wire::Method& method) {
  if (auto r = wire::write_method_frame(out_, channel, method, frame_max_); !r.ok()) return r;
  return flush();
}

Result<void> BlockingSession::queue_publish(std::uint16_t channel, const wire::BasicPublish& publish,
                                            const wire::BasicProperties& properties,
                                            std::span<const std::byte> body) {
  return wire::write_content(out_, channel, publish, properties, body, frame_max_);
}

Result<void> BlockingSession::publish(std::uint16_t channel, const wire::BasicPublish& publish,
                                      const wire::BasicProperties& properties,
                                      std::span<const std::byte> body) {
  if (auto r = queue_publish(channel, publish, properties, body); !r.ok()) return r;
  return flush();
}

Result<void> BlockingSession::send_raw(std::span<const std::byte> bytes) {
  out_.append(bytes);
  return flush();
}

Result<void> BlockingSession::flush() {
  while (!out_.empty()) {
    auto view = out_.view();
    iovec iov[wire::OutputView::max_parts];
    for (std::size_t i = 0; i < view.count; ++i)
      iov[i] = {const_cast<std::byte*>(view.parts[i].data()), view.parts[i].size()};
    ssize_t n = ::writev(fd_, iov, static_cast<int>(view.count));
    if (n < 0) {
      if (errno == EINTR) continue;
      return system_error("write");
    }
    out_.consume(static_cast<std::size_t>(n));
  }
  return {};
}

Result<wire::FrameView> BlockingSession::receive() {
  for (;;) {
    auto next = decoder_.next();
    if (!next.ok()) return next.error();
    if (next->has_value()) {
      ++frames_received_;
      return **next;
    }
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(timeout_.count()));
    if (ready == 0) return make_error(errc::timeout, "no frame from the broker within " + std::to_string(timeout_.count()) + " ms");
    if (ready < 0) {
      if (errno == EINTR) continue;
      return system_error("poll");
    }
    ssize_t n = ::recv(fd_, read_buffer_.data(), read_buffer_.size(), 0);
    if (n == 0) return make_error(errc::connection_lost, "the broker closed the socket");
    if (n < 0) {
      if (errno == EINTR) continue;
      return system_error("read");
    }
    bytes_received_ += static_cast<std::uint64_t>(n);
    decoder_.feed(std::span<const std::byte>(read_buffer_.data(), static_cast<std::size_t>(n)));
  }
}

Result<wire::Method> BlockingSession::receive_method(std::uint16_t channel) {
  for (;;) {
    auto frame = receive();
    if (!frame.ok()) return std::move(frame).error();
    if (frame->type == wire::FrameType::heartbeat) continue;
    if (frame->type != wire::FrameType::method)
      return make_error(errc::protocol_error, "expected a method frame, got frame type " +
                                                  std::to_string(static_cast<int>(frame->type)));
    auto m = wire::decode_method(frame->payload);
    if (!m.ok()) return m;
    if (auto* c = std::get_if<wire::ConnectionClose>(&*m)) {
      Error e = engine::close_error(c->reply_code, c->reply_text, c->class_id, c->method_id, false);
      (void)send(0, wire::ConnectionCloseOk{});
      return e;
    }
    if (frame->channel != channel) continue;  // another channel's traffic: not ours to read
    if (auto* c = std::get_if<wire::ChannelClose>(&*m)) {
      Error e = engine::close_error(c->reply_code, c->reply_text, c->class_id, c->method_id, true);
      (void)send(channel, wire::ChannelCloseOk{});
      return e;
    }
    return m;
  }
}

Result<void> BlockingSession::close() {
  if (auto r = send(0, wire::ConnectionClose{wire::reply::success, "bye", 0, 0}); !r.ok()) return r;
  for (;;) {
    auto m = receive_method(0);
    if (!m.ok()) return std::move(m).error();
    if (std::holds_alternative<wire::ConnectionCloseOk>(*m)) return {};
  }
}

}  // namespace warren::tools
