// --log-level and --log-format: the client's event records (warren/client/observer.hpp), one a
// line on stderr, as text or as JSON with fixed keys (docs/warren-cli.md, "Event records").
// Off by default: the command's own one-line error is what scripts read.
#pragma once

#include <memory>
#include <string>

#include "warren/client/observer.hpp"

namespace warren::cli {

// Null for "off"; otherwise an observer that prints records at `level` and above.
[[nodiscard]] std::shared_ptr<client::Observer> make_record_log(const std::string& level, const std::string& format);

}  // namespace warren::cli
