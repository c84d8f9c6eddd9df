// channel.* methods (class 20); see methods_connection.hpp for the fields() convention.
#pragma once

#include <cstdint>
#include <string_view>

#include "warren/wire/method_id.hpp"

namespace warren::wire {

// The answers the requests below name (`using Ok`).
struct ChannelFlowOk;

struct ChannelOpen {
  static constexpr MethodId id{20, 10};
  static constexpr std::string_view name = "channel.open";
  template <class S, class V> static void fields(S&, V& v) { v.reserved_shortstr(); }  // out-of-band
};

struct ChannelOpenOk {
  static constexpr MethodId id{20, 11};
  static constexpr std::string_view name = "channel.open-ok";
  template <class S, class V> static void fields(S&, V& v) { v.reserved_longstr(); }  // channel-id
};

struct ChannelFlow {
  using Ok = ChannelFlowOk;  // the one method that answers it
  static constexpr MethodId id{20, 20};
  static constexpr std::string_view name = "channel.flow";
  bool active = true;
  template <class S, class V> static void fields(S& s, V& v) { v.bit("active", s.active); }
};

struct ChannelFlowOk {
  static constexpr MethodId id{20, 21};
  static constexpr std::string_view name = "channel.flow-ok";
  bool active = true;
  template <class S, class V> static void fields(S& s, V& v) { v.bit("active", s.active); }
};

struct ChannelClose {
  static constexpr MethodId id{20, 40};
  static constexpr std::string_view name = "channel.close";
  std::uint16_t reply_code = 0;
  std::string_view reply_text{};
  std::uint16_t class_id = 0;
  std::uint16_t method_id = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v.short_("reply_code", s.reply_code);
    v.shortstr("reply_text", s.reply_text);
    v.short_("class_id", s.class_id);
    v.short_("method_id", s.method_id);
  }
};

struct ChannelCloseOk {
  static constexpr MethodId id{20, 41};
  static constexpr std::string_view name = "channel.close-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

}  // namespace warren::wire
