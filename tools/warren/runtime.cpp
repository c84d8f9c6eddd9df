#include "runtime.hpp"

#include <uv.h>

#include "warren/asio/asio_driver.hpp"
#include "warren/uv/uv_driver.hpp"

namespace warren::cli {
namespace {

class UvRuntime final : public Runtime {
 public:
  UvRuntime() : driver_(uv_default_loop()) {}
  client::Driver& driver() override { return driver_; }
  void run() override { uv_run(uv_default_loop(), UV_RUN_DEFAULT); }

 private:
  uv::UvDriver driver_;
};

class AsioRuntime final : public Runtime {
 public:
  AsioRuntime() : driver_(io_) {}
  client::Driver& driver() override { return driver_; }
  void run() override { io_.run(); }

 private:
  asio::io_context io_{1};
  asio_driver::AsioDriver driver_;
};

}  // namespace

std::unique_ptr<Runtime> make_runtime(std::string_view driver) {
  if (driver == "uv") return std::make_unique<UvRuntime>();
  if (driver == "asio") return std::make_unique<AsioRuntime>();
  return nullptr;
}

}  // namespace warren::cli
