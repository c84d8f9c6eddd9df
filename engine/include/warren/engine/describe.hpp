// One readable line per event, for logs and test scripts. Secrets never appear in events.
#pragma once

#include <string>

#include "warren/engine/events.hpp"

namespace warren::engine {

[[nodiscard]] std::string to_string(const Event& event);
[[nodiscard]] std::string_view to_string(PublishOutcome outcome);

}  // namespace warren::engine
