// When a recovering producer (`work put`, `log append`) makes again what did not land: one
// timer, and a pause that doubles from 250 ms to 5 s while the tries keep failing (a quorum
// queue electing a leader, a full queue that rejects publishes, a session dialling), and
// starts over once one lands. Never at once: a try made while the session dials fails at once.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "warren/client/driver.hpp"

namespace warren::cli {

class Again {
 public:
  Again(client::Driver& driver, std::function<void()> fire) : driver_(driver), fire_(std::move(fire)) {}

  // After the current pause, unless already armed; the next pause is twice as long.
  void arm() {
    if (armed_) return;
    if (!timer_)
      timer_ = driver_.keepalive_timer([this] {  // work is owed: the loop must not end meanwhile
        armed_ = false;
        fire_();
      });
    armed_ = true;
    timer_->arm(driver_.now() + pause_);
    pause_ = std::min(pause_ * 2, longest);
  }
  // The job is closing (it finished, failed or stops): nothing is made again, and the timer
  // no longer holds the loop (a failure would otherwise wait out a pause of up to 5 s).
  void cancel() {
    if (timer_) timer_->cancel();
    armed_ = false;
  }
  // One landed: the next failure waits the shortest pause again.
  void landed() { pause_ = shortest; }
  [[nodiscard]] bool armed() const noexcept { return armed_; }

 private:
  static constexpr std::chrono::milliseconds shortest{250}, longest{5000};
  client::Driver& driver_;
  std::function<void()> fire_;
  std::unique_ptr<client::Timer> timer_;
  std::chrono::milliseconds pause_ = shortest;
  bool armed_ = false;
};

}  // namespace warren::cli
