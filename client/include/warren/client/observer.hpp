// What happens inside a connection and the layers above it, for a log, a metrics or a tracing
// adapter: one Record per event, with a stable dotted name (docs/observability.md lists them).
// An observer is separate from the application's own hooks (on_closed, on_blocked, ...), so an
// adapter never takes a hook away from the application; null means off, one untaken branch
// per event. Records are handed over on the loop's thread, never inside an engine call, and
// their views last for the call only.
//
// No record carries a secret: a connection is named by its host and port (never a URL's user
// information), and no password, TLS key or certificate is ever put in a record's fields.
#pragma once

#include <cstdint>
#include <string_view>

#include "warren/engine/types.hpp"
#include "warren/error.hpp"

namespace warren::client {

enum class Level : std::uint8_t { debug, info, warning, error };
[[nodiscard]] const char* to_string(Level level) noexcept;

struct Record {
  std::string_view name{};        // "connection.connected", "channel.closed", ...
  Level level = Level::info;
  std::string_view connection{};  // "host:port" of the connection it concerns
  engine::ChannelId channel = 0;  // the channel it concerns; 0: the connection itself
  const Error* cause = nullptr;   // why, where there is a why (a close's reply code and text)
  std::string_view subject{};     // what it is about, where there is one: a queue, a consumer
                                  // tag, the broker's reason for a block
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_record(const Record& record) = 0;
};

}  // namespace warren::client
