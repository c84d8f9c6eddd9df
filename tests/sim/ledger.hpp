// The layer simulation's ledger (tests/sim/layers.hpp): every callback handed in, how often
// it ran, and the violations found so far.
#pragma once

#include <string>
#include <vector>

namespace warren::layersim {

struct Ledger {
  struct Callback {
    std::string what;
    int calls = 0;
    bool owed = true;  // must run once; otherwise at most once
  };
  std::vector<Callback> callbacks;
  std::vector<std::string> violations;

  int reg(std::string what, bool owed = true) {
    callbacks.push_back({std::move(what), 0, owed});
    return static_cast<int>(callbacks.size()) - 1;
  }
  void hit(int id) {
    auto& cb = callbacks[static_cast<std::size_t>(id)];
    if (++cb.calls == 2) violation("exactly once: " + cb.what + " ran twice");
  }
  void violation(std::string text) { violations.push_back(std::move(text)); }
  // At the end: every owed callback ran.
  void check_all_ran() {
    for (const auto& cb : callbacks)
      if (cb.owed && cb.calls == 0) violation("exactly once: " + cb.what + " never ran");
  }
};

}  // namespace warren::layersim
