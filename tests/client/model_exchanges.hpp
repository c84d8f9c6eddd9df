// The model broker's exchanges (tests/client/fake_driver.hpp, for tests/sim/): declared
// exchanges of RabbitMQ's built-in types direct, fanout and topic, their queue bindings, and
// routing. The default exchange ("") is not here: the model broker routes it by queue name.
// What a declare, bind or publish is refused with is the caller's to send; this file only
// says which reply RabbitMQ gives.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace warren::test {

class ModelExchanges {
 public:
  struct Refusal {
    std::uint16_t code;  // 404, 406 (channel errors)
    std::string text;
  };

  ModelExchanges() {
    exchanges_["amq.direct"] = {"direct", {}};
    exchanges_["amq.fanout"] = {"fanout", {}};
    exchanges_["amq.topic"] = {"topic", {}};
  }

  // exchange.declare: created when missing; an existing one must have the same type.
  [[nodiscard]] std::optional<Refusal> declare(const std::string& name, const std::string& type, bool passive) {
    auto it = exchanges_.find(name);
    if (it == exchanges_.end()) {
      if (passive) return Refusal{404, "NOT_FOUND - no exchange '" + name + "' in vhost '/'"};
      if (type != "direct" && type != "fanout" && type != "topic")
        return Refusal{503, "COMMAND_INVALID - unknown exchange type '" + type + "'"};
      exchanges_[name] = {type, {}};
      return std::nullopt;
    }
    if (!passive && it->second.type != type)
      return Refusal{406, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange '" + name +
                              "' in vhost '/': received '" + type + "' but current is '" + it->second.type + "'"};
    return std::nullopt;
  }
  // exchange.delete: RabbitMQ answers delete-ok for a missing exchange too.
  void remove(const std::string& name) { exchanges_.erase(name); }

  // queue.bind: the exchange must exist (the queue is the caller's to check).
  [[nodiscard]] std::optional<Refusal> bind(const std::string& exchange, const std::string& queue, const std::string& key) {
    auto it = exchanges_.find(exchange);
    if (it == exchanges_.end()) return Refusal{404, "NOT_FOUND - no exchange '" + exchange + "' in vhost '/'"};
    it->second.bindings.insert({queue, key});
    return std::nullopt;
  }
  void unbind(const std::string& exchange, const std::string& queue, const std::string& key) {
    if (auto it = exchanges_.find(exchange); it != exchanges_.end()) it->second.bindings.erase({queue, key});
  }
  [[nodiscard]] bool exists(const std::string& name) const { return exchanges_.contains(name); }

  // The queues a publish to `exchange` with `key` reaches (each once), or nullopt when the
  // exchange does not exist (RabbitMQ closes the channel: 404).
  [[nodiscard]] std::optional<std::vector<std::string>> route(const std::string& exchange, const std::string& key) const {
    auto it = exchanges_.find(exchange);
    if (it == exchanges_.end()) return std::nullopt;
    std::set<std::string> queues;
    for (const auto& [queue, pattern] : it->second.bindings) {
      const bool match = it->second.type == "fanout" ? true
                         : it->second.type == "direct" ? pattern == key
                                                       : topic_matches(pattern, key);
      if (match) queues.insert(queue);
    }
    return std::vector<std::string>(queues.begin(), queues.end());
  }

  // A topic binding's pattern against a routing key: words split by '.', '*' is exactly one
  // word, '#' zero or more.
  [[nodiscard]] static bool topic_matches(std::string_view pattern, std::string_view key) {
    return match_words(words(pattern), 0, words(key), 0);
  }

 private:
  struct Exchange {
    std::string type;
    std::set<std::pair<std::string, std::string>> bindings;  // queue, routing key (pattern)
  };
  static std::vector<std::string_view> words(std::string_view s) {
    std::vector<std::string_view> out;
    for (std::size_t at = 0;;) {
      const auto dot = s.find('.', at);
      out.push_back(s.substr(at, dot == std::string_view::npos ? std::string_view::npos : dot - at));
      if (dot == std::string_view::npos) return out;
      at = dot + 1;
    }
  }
  static bool match_words(const std::vector<std::string_view>& p, std::size_t i, const std::vector<std::string_view>& k,
                          std::size_t j) {
    if (i == p.size()) return j == k.size();
    if (p[i] == "#") {
      for (std::size_t skip = j; skip <= k.size(); ++skip)
        if (match_words(p, i + 1, k, skip)) return true;
      return false;
    }
    if (j == k.size()) return false;
    return (p[i] == "*" || p[i] == k[j]) && match_words(p, i + 1, k, j + 1);
  }

  std::map<std::string, Exchange> exchanges_;
};

}  // namespace warren::test
