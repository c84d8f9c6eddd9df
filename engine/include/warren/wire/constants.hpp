// Wire constants of AMQP 0-9-1 as RabbitMQ speaks it: frame types, sizes, class ids, reply
// codes. Facts from the specification; nothing here allocates or decides.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace warren::wire {

enum class FrameType : std::uint8_t {
  method = 1,
  header = 2,
  body = 3,
  heartbeat = 8,
  // Not a frame type: how a decoder reading a client's bytes reports its protocol header.
  protocol_header = 'A',
};

inline constexpr std::byte frame_end{0xCE};
inline constexpr std::size_t frame_header_bytes = 7;  // type, channel, payload size
inline constexpr std::size_t frame_overhead_bytes = frame_header_bytes + 1;  // + end byte
// Before tune every frame must fit the specification's minimum frame size.
inline constexpr std::uint32_t min_frame_max_bytes = 4096;
inline constexpr std::size_t method_header_bytes = 4;    // class id, method id
inline constexpr std::size_t content_header_min_bytes = 14;  // class, weight, size, flags

inline constexpr std::array<std::byte, 8> protocol_header{
    std::byte{'A'}, std::byte{'M'}, std::byte{'Q'}, std::byte{'P'},
    std::byte{0},   std::byte{0},   std::byte{9},   std::byte{1}};

// Nesting of field tables and arrays deeper than this is refused: no legitimate peer needs
// it, and a bounded depth keeps validation's recursion bounded.
inline constexpr int max_table_depth = 64;

enum class ClassId : std::uint16_t {
  connection = 10,
  channel = 20,
  exchange = 40,
  queue = 50,
  basic = 60,
  confirm = 85,
};

// Reply codes a close may carry (AMQP 0-9-1 constants).
namespace reply {
inline constexpr std::uint16_t success = 200;
inline constexpr std::uint16_t content_too_large = 311;
inline constexpr std::uint16_t no_route = 312;
inline constexpr std::uint16_t no_consumers = 313;
inline constexpr std::uint16_t connection_forced = 320;
inline constexpr std::uint16_t invalid_path = 402;
inline constexpr std::uint16_t access_refused = 403;
inline constexpr std::uint16_t not_found = 404;
inline constexpr std::uint16_t resource_locked = 405;
inline constexpr std::uint16_t precondition_failed = 406;
inline constexpr std::uint16_t frame_error = 501;
inline constexpr std::uint16_t syntax_error = 502;
inline constexpr std::uint16_t command_invalid = 503;
inline constexpr std::uint16_t channel_error = 504;
inline constexpr std::uint16_t unexpected_frame = 505;
inline constexpr std::uint16_t resource_error = 506;
inline constexpr std::uint16_t not_allowed = 530;
inline constexpr std::uint16_t not_implemented = 540;
inline constexpr std::uint16_t internal_error = 541;
}  // namespace reply

}  // namespace warren::wire
