// The event loop a command runs on, chosen by --driver: libuv or Asio. Everything above it
// is written once against client::Driver.
#pragma once

#include <memory>
#include <string_view>

#include "warren/client/driver.hpp"

namespace warren::cli {

class Runtime {
 public:
  virtual ~Runtime() = default;
  [[nodiscard]] virtual client::Driver& driver() = 0;
  // Runs until nothing is left to do: every connection closed (timers do not keep it alive).
  virtual void run() = 0;
};

// "uv" or "asio"; nullptr for anything else.
[[nodiscard]] std::unique_ptr<Runtime> make_runtime(std::string_view driver);

}  // namespace warren::cli
