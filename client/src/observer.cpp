#include "warren/client/observer.hpp"

namespace warren::client {

const char* to_string(Level level) noexcept {
  switch (level) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warning: return "warning";
    case Level::error: return "error";
  }
  return "?";
}

}  // namespace warren::client
