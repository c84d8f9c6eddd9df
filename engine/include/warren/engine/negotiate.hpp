// The handshake's pure decisions: limits and heartbeat by the specification's rules, the
// SASL mechanism and its response, and how a broker's close becomes an Error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "warren/engine/options.hpp"
#include "warren/error.hpp"

namespace warren::engine {

// channel_max and frame_max: the smaller non-zero of both sides; 0 only when both say 0.
// Never 0 back to a broker that proposed a limit (RabbitMQ drops such a connection).
[[nodiscard]] std::uint32_t negotiate_limit(std::uint32_t ours, std::uint32_t theirs) noexcept;

// A 0 on either side is "no proposal": the greater wins; both 0 means no heartbeats;
// both non-zero, the smaller.
[[nodiscard]] std::uint16_t negotiate_heartbeat(std::uint16_t ours_s, std::uint16_t theirs_s) noexcept;

[[nodiscard]] std::string_view mechanism_name(Mechanism m) noexcept;

// Whether the broker's space-separated list offers `m` (a set: order does not matter).
[[nodiscard]] bool offers_mechanism(std::string_view offered, Mechanism m) noexcept;

// The start-ok response for the mechanism (PLAIN: \0user\0password; AMQPLAIN: a field
// table's content with LOGIN and PASSWORD; EXTERNAL: empty, the TLS certificate speaks).
[[nodiscard]] std::string sasl_response(const ConnectionOptions& options);

// warren's client properties for connection.start-ok (product, version, platform, the
// capabilities it implements, connection_name), with the application's own merged over them.
[[nodiscard]] wire::FieldTable client_properties(const ConnectionOptions& options);

// A broker's connection.close or channel.close as an Error: 403 access_refused,
// 404 not_found, 405 resource_locked, 406 precondition_failed, otherwise channel_closed or
// connection_closed, with the reply code, text and the method it blamed.
[[nodiscard]] Error close_error(std::uint16_t reply_code, std::string_view reply_text,
                                std::uint16_t class_id, std::uint16_t method_id, bool channel);

}  // namespace warren::engine
