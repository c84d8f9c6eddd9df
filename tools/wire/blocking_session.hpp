// A blocking, codec-only AMQP session over a plain TCP socket: enough to exercise the codec
// against a real RabbitMQ (the codec demo, the codec's broker tests). It is not the client:
// no heartbeats, no timers, no recovery, one thread. client/ and transports/ are where a real
// connection lives.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "warren/wire/wire.hpp"

namespace warren::tools {

struct SessionOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 5672;
  std::string user = "guest";
  std::string password = "guest";
  std::string vhost = "/";
  std::chrono::milliseconds receive_timeout{10000};
};

// What the broker offered during the handshake, kept for inspection.
struct Handshake {
  wire::FieldTable server_properties;
  std::string mechanisms;
  std::string locales;
  wire::ConnectionTune tune;
  wire::ConnectionTuneOk agreed;
};

class BlockingSession {
 public:
  // Opens the TCP connection and runs the handshake up to connection.open-ok. A refused
  // login comes back as the broker's connection.close (403), with its text.
  [[nodiscard]] static Result<BlockingSession> connect(const SessionOptions& options);

  BlockingSession(BlockingSession&& other) noexcept;
  BlockingSession& operator=(BlockingSession&&) = delete;
  ~BlockingSession();

  [[nodiscard]] const Handshake& handshake() const { return handshake_; }

  [[nodiscard]] Result<void> send(std::uint16_t channel, const wire::Method& method);
  [[nodiscard]] Result<void> publish(std::uint16_t channel, const wire::BasicPublish& publish,
                                     const wire::BasicProperties& properties,
                                     std::span<const std::byte> body);
  // Queues frames without writing them; flush() writes everything queued.
  [[nodiscard]] Result<void> queue_publish(std::uint16_t channel, const wire::BasicPublish& publish,
                                           const wire::BasicProperties& properties,
                                           std::span<const std::byte> body);
  [[nodiscard]] Result<void> flush();
  // Raw bytes, for tests that show the broker's answer to a malformed frame.
  [[nodiscard]] Result<void> send_raw(std::span<const std::byte> bytes);

  // The next frame from the broker; its payload is valid until the next call. Heartbeats are
  // returned like any frame. A timeout or a closed socket is an error.
  [[nodiscard]] Result<wire::FrameView> receive();
  // The next method frame on `channel`, skipping heartbeats; the method's views are valid
  // until the next call. A connection.close or a channel.close on the channel becomes the
  // error it carries.
  [[nodiscard]] Result<wire::Method> receive_method(std::uint16_t channel);

  // Sends connection.close and waits for close-ok.
  [[nodiscard]] Result<void> close();

  [[nodiscard]] std::uint64_t bytes_received() const { return bytes_received_; }
  [[nodiscard]] std::uint64_t frames_received() const { return frames_received_; }

 private:
  BlockingSession(int fd, std::chrono::milliseconds timeout);
  Result<void> run_handshake(const SessionOptions& options);

  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  wire::FrameDecoder decoder_;
  wire::OutputQueue out_;
  std::vector<std::byte> read_buffer_;
  std::uint32_t frame_max_ = wire::min_frame_max_bytes;
  Handshake handshake_;
  std::uint64_t bytes_received_ = 0;
  std::uint64_t frames_received_ = 0;
};

}  // namespace warren::tools
