// The deliveries one subscription holds unsettled, with when each arrived: kept only for a
// subscription that asked to be warned before the broker's consumer_timeout
// (ConsumeOptions::ack_timeout), so no other subscription pays for it. Tags arrive in increasing
// order on a channel, so the queue stays sorted: a multiple settle pops from the front, a
// single one is a binary search.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>

#include "warren/engine/types.hpp"

namespace warren::client::detail {

class HeldDeliveries {
 public:
  // Warned once a delivery has been held past `warn_after`.
  explicit HeldDeliveries(engine::Duration warn_after) : warn_after_(warn_after) {}

  void delivered(std::uint64_t tag, engine::Instant at) { held_.push_back(Held{tag, at, false}); }

  void settled(std::uint64_t tag, bool multiple) {
    if (multiple) {
      // Tag 0 with multiple is "everything so far" (AMQP 0-9-1).
      while (!held_.empty() && (tag == 0 || held_.front().tag <= tag)) held_.pop_front();
      return;
    }
    auto it = std::lower_bound(held_.begin(), held_.end(), tag, [](const Held& h, std::uint64_t t) { return h.tag < t; });
    if (it != held_.end() && it->tag == tag) held_.erase(it);
  }

  // When the next warning falls due: the earliest delivery not warned of yet.
  [[nodiscard]] std::optional<engine::Instant> next_warning() const {
    for (const Held& h : held_)
      if (!h.warned) return h.at + warn_after_;
    return std::nullopt;
  }

  // fn(tag, held_for) for each delivery held past warn_after at `now`, once each.
  template <class F>
  void warn_due(engine::Instant now, F&& fn) {
    for (Held& h : held_) {
      if (h.at + warn_after_ > now) break;  // in arrival order: the rest are younger
      if (h.warned) continue;
      h.warned = true;
      fn(h.tag, std::chrono::duration_cast<engine::Duration>(now - h.at));
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return held_.size(); }
  // The delivery held longest: the one the broker's ack timeout is about.
  [[nodiscard]] std::optional<std::uint64_t> oldest() const {
    if (held_.empty()) return std::nullopt;
    return held_.front().tag;
  }

 private:
  struct Held {
    std::uint64_t tag;
    engine::Instant at;
    bool warned;
  };
  std::deque<Held> held_;
  engine::Duration warn_after_;
};

}  // namespace warren::client::detail
