#include "warren/uv/uv_driver.hpp"

#include <algorithm>
#include <string>

#include "close_handle.hpp"
#include "uv_stream.hpp"

namespace warren::uv {
namespace {

class UvTimer final : public client::Timer {
 public:
  UvTimer(uv_loop_t* loop, std::function<void()> on_fire, bool keeps_alive) : on_fire_(std::move(on_fire)) {
    handle_ = new uv_timer_t;
    uv_timer_init(loop, handle_);
    handle_->data = this;
    // A heartbeat must not keep the program alive; a Session's retry must.
    if (!keeps_alive) uv_unref(reinterpret_cast<uv_handle_t*>(handle_));
  }
  ~UvTimer() override { detail::close_and_free(handle_); }
  void arm(engine::Instant at) override {
    auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(at - std::chrono::steady_clock::now()).count();
    uv_timer_start(handle_, [](uv_timer_t* t) {
      if (auto* self = static_cast<UvTimer*>(t->data)) self->on_fire_();
    }, static_cast<std::uint64_t>(std::max<long long>(delay, 0) + 1), 0);
  }
  void cancel() override { uv_timer_stop(handle_); }

 private:
  uv_timer_t* handle_;
  std::function<void()> on_fire_;
};

}  // namespace

UvDriver::UvDriver(uv_loop_t* loop) : loop_(loop), async_(new uv_async_t) {
  uv_async_init(loop_, async_, &UvDriver::on_async);
  async_->data = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(async_));  // posting is not a reason to stay alive
}

UvDriver::~UvDriver() { detail::close_and_free(async_); }

engine::Instant UvDriver::now() { return std::chrono::steady_clock::now(); }

std::unique_ptr<client::Stream> UvDriver::dial(const client::Endpoint& endpoint, engine::Duration timeout,
                                               std::optional<client::TlsSettings> tls, client::StreamEvents& events) {
  return detail::dial_stream(loop_, endpoint, timeout, std::move(tls), events);
}

std::unique_ptr<client::Timer> UvDriver::timer(std::function<void()> on_fire) {
  return std::make_unique<UvTimer>(loop_, std::move(on_fire), false);
}

std::unique_ptr<client::Timer> UvDriver::keepalive_timer(std::function<void()> on_fire) {
  return std::make_unique<UvTimer>(loop_, std::move(on_fire), true);
}

void UvDriver::post(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    posted_.push_back(std::move(fn));
  }
  uv_async_send(async_);
}

UvDriver::KeepAlive UvDriver::keep_alive() {
  hold(+1);
  return KeepAlive(this);
}

void UvDriver::KeepAlive::reset() {
  if (auto* driver = std::exchange(driver_, nullptr)) driver->post([driver] { driver->hold(-1); });
}

void UvDriver::hold(int delta) {
  holders_ += delta;
  if (holders_ > 0) uv_ref(reinterpret_cast<uv_handle_t*>(async_));
  else uv_unref(reinterpret_cast<uv_handle_t*>(async_));
}

void UvDriver::on_async(uv_async_t* handle) {
  auto* self = static_cast<UvDriver*>(handle->data);
  if (!self) return;
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(self->mutex_);
    run.swap(self->posted_);
  }
  for (auto& fn : run) fn();
}

}  // namespace warren::uv
