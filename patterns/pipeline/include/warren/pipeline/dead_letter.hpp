// The dead-letter envelope: the original message's headers plus what an operator needs to
// understand and replay a failed record — the original exchange and routing key, the error's
// type and message, the attempt, the time and the pipeline's name. Its content header must fit
// one frame (RabbitMQ refuses a header frame over the negotiated frame_max, and big error
// headers have broken other clients' error queues), so the error text is cut to fit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "warren/client/options.hpp"
#include "warren/pipeline/core.hpp"
#include "warren/result.hpp"

namespace warren::pipeline {

namespace envelope {
inline constexpr std::string_view original_exchange = "x-pipeline-original-exchange";
inline constexpr std::string_view original_routing_key = "x-pipeline-original-routing-key";
inline constexpr std::string_view error_type = "x-pipeline-error-type";
inline constexpr std::string_view error_message = "x-pipeline-error-message";
inline constexpr std::string_view attempt = "x-pipeline-attempt";  // long: 1 for a first delivery
inline constexpr std::string_view failed_at = "x-pipeline-failed-at";  // timestamp (T)
inline constexpr std::string_view pipeline = "x-pipeline-name";
// The source's per-message TTL (`expiration`), when it had one: the envelope itself carries
// none, or the record would expire in the dead-letter queue (RabbitMQ's own dead-lettering
// drops it too).
inline constexpr std::string_view original_expiration = "x-pipeline-original-expiration";
// The source's user_id when it was another user's than the one the pipeline's connection
// logged in as: RabbitMQ refuses (406) a publish whose user_id is not the publishing
// connection's user, so the envelope (and a record's output) carries none and names it here.
inline constexpr std::string_view original_user_id = "x-pipeline-original-user-id";
}  // namespace envelope

struct EnvelopeFacts {
  std::string_view pipeline{};
  std::string_view exchange{};   // where the source message was first published
  std::string_view routing_key{};
  const wire::FieldTable* headers = nullptr;  // the source message's own headers
  const RecordError* error = nullptr;
  std::uint32_t attempt = 1;
  std::uint64_t failed_at_s = 0;  // POSIX seconds
  std::optional<std::string_view> expiration{};  // the source's per-message TTL, if any
  std::optional<std::string_view> user_id{};     // the source's user_id, if it cannot travel
};

// The envelope's headers, so that `base` (the source's properties, headers replaced by these)
// encodes into a content header of at most frame_max_bytes - 8 (the frame's own overhead).
// A long error message is cut (with a "..." mark); when even the empty text cannot fit (the
// original headers alone are too big), the result is errc::frame_too_large.
[[nodiscard]] Result<wire::FieldTable> envelope_headers(const EnvelopeFacts& facts, client::Properties base,
                                                        std::uint32_t frame_max_bytes);

// The attempt a delivery is: a quorum queue's x-delivery-count + 1; otherwise 2 once the
// broker marked it redelivered (the broker keeps no count on a classic queue), else 1.
[[nodiscard]] std::uint32_t attempt_of(const Metadata& metadata) noexcept;

}  // namespace warren::pipeline
