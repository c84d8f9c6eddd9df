// --log-level and --log-format: the client's event records (warren/client/observer.hpp), one a
// line on stderr, as text or as JSON with fixed keys (docs/warren-cli.md, "Event records").
// Off by default: the command's own one-line error is what scripts read.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "warren/client/observer.hpp"

namespace warren::cli {

// Null for "off"; otherwise an observer that prints records at `level` and above.
[[nodiscard]] std::shared_ptr<client::Observer> make_record_log(const std::string& level, const std::string& format);

// The command's last word on stderr: why it failed ("warren: <what>: <why>", docs/warren-cli.md,
// "EXIT STATUS AND ERRORS") or that a signal stopped it. Printed whatever --log-level says;
// under --log-format json it is one record like the others, so a JSON log reader never meets
// a line it cannot parse, and the text it would have printed is its cause.
struct FinalLine {
  std::string_view event;  // "command.failed", "command.stopped"
  client::Level level = client::Level::error;
  std::string_view what{};  // the step it is about ("message 3", "consume q"), or ""
  std::string_view why{};
  std::uint16_t reply_code = 0;  // the broker's, when the cause has one
};
void print_final_line(const std::string& format, const FinalLine& line);

}  // namespace warren::cli
