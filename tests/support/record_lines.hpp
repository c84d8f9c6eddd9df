// An observer that keeps each record as one line, "name subject cause", for tests that look for
// a record, count them, or check that no record holds a secret.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "warren/client/observer.hpp"

namespace warren::test {

struct RecordLines final : client::Observer {
  std::vector<std::string> lines;
  void on_record(const client::Record& r) override {
    lines.push_back(std::string(r.name) + " " + std::string(r.subject) + (r.cause ? " " + r.cause->to_string() : ""));
  }
  [[nodiscard]] int count(std::string_view name) const {
    int n = 0;
    for (const auto& l : lines) n += l.rfind(std::string(name) + " ", 0) == 0;
    return n;
  }
  [[nodiscard]] bool mention(std::string_view text) const {
    for (const auto& l : lines)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
  // The first line of record `name`, or "".
  [[nodiscard]] std::string find(std::string_view name) const {
    for (const auto& l : lines)
      if (l.rfind(std::string(name) + " ", 0) == 0) return l;
    return {};
  }
};

}  // namespace warren::test
