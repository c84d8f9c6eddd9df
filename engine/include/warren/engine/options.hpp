// What a connection is opened with. Defaults follow RabbitMQ's clients; every limit is
// negotiated down, never up.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "warren/engine/types.hpp"
#include "warren/wire/field_value.hpp"

namespace warren::engine {

enum class Mechanism : std::uint8_t { plain, amqplain, external };

struct ConnectionOptions {
  std::string user = "guest";
  std::string password = "guest";  // never logged, never printed
  std::string vhost = "/";
  Mechanism mechanism = Mechanism::plain;
  std::string connection_name{};      // shown in the management UI ("connection_name")
  wire::FieldTable client_properties{};  // merged over warren's own (product, capabilities, ...)

  std::uint16_t heartbeat_s = 60;      // our proposal; 0 = none from our side
  std::uint32_t frame_max_bytes = 131072;  // 0 = no limit from our side
  std::uint16_t channel_max = 2047;    // 0 = no limit from our side

  Duration handshake_timeout{10000};   // protocol header to open-ok
  Duration request_timeout{10000};     // each method's answer; the default publish deadline
  Duration close_timeout{10000};       // connection.close to close-ok

  std::uint16_t default_prefetch = 250;  // a subscription that names none gets this
  // Past this the engine reports congestion. Small on purpose: a publisher that stops here
  // keeps its output in cache, which cost 0.35 us/msg at 4 MiB against 0.19 at 256 KiB
  // (warren perf, 64 B, no confirms), and a socket's send buffer holds about as much.
  std::size_t output_limit_bytes = 256 * 1024;
  std::uint64_t max_body_bytes = 128ull * 1024 * 1024;  // RabbitMQ's default max_message_size
};

}  // namespace warren::engine
