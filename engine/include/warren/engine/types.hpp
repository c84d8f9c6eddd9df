// The engine's vocabulary: time as a parameter (the engine never reads a clock), and the
// identifiers of channels, requests and publishes.
#pragma once

#include <chrono>
#include <cstdint>

namespace warren::engine {

// A point in time handed in by the driver (or a test's virtual clock). The engine only
// compares and adds; it never asks what time it is.
using Instant = std::chrono::steady_clock::time_point;
using Duration = std::chrono::milliseconds;

using ChannelId = std::uint16_t;
using RequestId = std::uint64_t;  // unique per connection, never 0
using PublishId = std::uint64_t;  // unique per connection, never 0

}  // namespace warren::engine
