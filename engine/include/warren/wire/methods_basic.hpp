// basic.* methods (class 60) and confirm.* (class 85); see methods_connection.hpp for the
// fields() convention. Not here: basic.recover-async (deprecated) and the tx class. The
// message path's methods (publish, deliver and the settles) have theirs always inlined: out
// of line, a publish called its encoder's walk.
#pragma once

#include <cstdint>
#include <string_view>

#include "warren/always_inline.hpp"
#include "warren/wire/field_table.hpp"
#include "warren/wire/method_id.hpp"

namespace warren::wire {

// The answers the requests below name (`using Ok`).
struct BasicQosOk;
struct BasicRecoverOk;

struct BasicQos {
  using Ok = BasicQosOk;  // the one method that answers it
  static constexpr MethodId id{60, 10};
  static constexpr std::string_view name = "basic.qos";
  std::uint32_t prefetch_size = 0;  // bytes; RabbitMQ supports only 0
  std::uint16_t prefetch_count = 0;
  bool global = false;
  template <class S, class V> static void fields(S& s, V& v) {
    v.long_("prefetch_size", s.prefetch_size);
    v.short_("prefetch_count", s.prefetch_count);
    v.bit("global", s.global);
  }
};

struct BasicQosOk {
  static constexpr MethodId id{60, 11};
  static constexpr std::string_view name = "basic.qos-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

struct BasicConsume {
  static constexpr MethodId id{60, 20};
  static constexpr std::string_view name = "basic.consume";
  std::string_view queue{};
  std::string_view consumer_tag{};  // empty: the broker names it
  bool no_local = false;
  bool no_ack = false;
  bool exclusive = false;
  bool no_wait = false;
  TableRef arguments{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("queue", s.queue);
    v.shortstr("consumer_tag", s.consumer_tag);
    v.bit("no_local", s.no_local);
    v.bit("no_ack", s.no_ack);
    v.bit("exclusive", s.exclusive);
    v.bit("no_wait", s.no_wait);
    v.table("arguments", s.arguments);
  }
};

struct BasicConsumeOk {
  static constexpr MethodId id{60, 21};
  static constexpr std::string_view name = "basic.consume-ok";
  std::string_view consumer_tag{};
  template <class S, class V> static void fields(S& s, V& v) { v.shortstr("consumer_tag", s.consumer_tag); }
};

// Both directions: the client cancels, and RabbitMQ cancels a consumer whose queue went away.
struct BasicCancel {
  static constexpr MethodId id{60, 30};
  static constexpr std::string_view name = "basic.cancel";
  std::string_view consumer_tag{};
  bool no_wait = false;
  template <class S, class V> static void fields(S& s, V& v) {
    v.shortstr("consumer_tag", s.consumer_tag);
    v.bit("no_wait", s.no_wait);
  }
};

struct BasicCancelOk {
  static constexpr MethodId id{60, 31};
  static constexpr std::string_view name = "basic.cancel-ok";
  std::string_view consumer_tag{};
  template <class S, class V> static void fields(S& s, V& v) { v.shortstr("consumer_tag", s.consumer_tag); }
};

struct BasicPublish {
  static constexpr MethodId id{60, 40};
  static constexpr std::string_view name = "basic.publish";
  std::string_view exchange{};
  std::string_view routing_key{};
  bool mandatory = false;
  bool immediate = false;  // RabbitMQ refuses it (540); kept for completeness of the codec
  template <class S, class V> WARREN_ALWAYS_INLINE static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("exchange", s.exchange);
    v.shortstr("routing_key", s.routing_key);
    v.bit("mandatory", s.mandatory);
    v.bit("immediate", s.immediate);
  }
};

struct BasicReturn {
  static constexpr MethodId id{60, 50};
  static constexpr std::string_view name = "basic.return";
  std::uint16_t reply_code = 0;
  std::string_view reply_text{};
  std::string_view exchange{};
  std::string_view routing_key{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.short_("reply_code", s.reply_code);
    v.shortstr("reply_text", s.reply_text);
    v.shortstr("exchange", s.exchange);
    v.shortstr("routing_key", s.routing_key);
  }
};

struct BasicDeliver {
  static constexpr MethodId id{60, 60};
  static constexpr std::string_view name = "basic.deliver";
  std::string_view consumer_tag{};
  std::uint64_t delivery_tag = 0;
  bool redelivered = false;
  std::string_view exchange{};
  std::string_view routing_key{};
  template <class S, class V> WARREN_ALWAYS_INLINE static void fields(S& s, V& v) {
    v.shortstr("consumer_tag", s.consumer_tag);
    v.longlong("delivery_tag", s.delivery_tag);
    v.bit("redelivered", s.redelivered);
    v.shortstr("exchange", s.exchange);
    v.shortstr("routing_key", s.routing_key);
  }
};

struct BasicGet {
  static constexpr MethodId id{60, 70};
  static constexpr std::string_view name = "basic.get";
  std::string_view queue{};
  bool no_ack = false;
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("queue", s.queue);
    v.bit("no_ack", s.no_ack);
  }
};

struct BasicGetOk {
  static constexpr MethodId id{60, 71};
  static constexpr std::string_view name = "basic.get-ok";
  std::uint64_t delivery_tag = 0;
  bool redelivered = false;
  std::string_view exchange{};
  std::string_view routing_key{};
  std::uint32_t message_count = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v.longlong("delivery_tag", s.delivery_tag);
    v.bit("redelivered", s.redelivered);
    v.shortstr("exchange", s.exchange);
    v.shortstr("routing_key", s.routing_key);
    v.long_("message_count", s.message_count);
  }
};

struct BasicGetEmpty {
  static constexpr MethodId id{60, 72};
  static constexpr std::string_view name = "basic.get-empty";
  template <class S, class V> static void fields(S&, V& v) { v.reserved_shortstr(); }  // cluster-id
};

// Both directions: a consumer acks a delivery; a broker in confirm mode acks a publish.
struct BasicAck {
  static constexpr MethodId id{60, 80};
  static constexpr std::string_view name = "basic.ack";
  std::uint64_t delivery_tag = 0;
  bool multiple = false;
  template <class S, class V> WARREN_ALWAYS_INLINE static void fields(S& s, V& v) {
    v.longlong("delivery_tag", s.delivery_tag);
    v.bit("multiple", s.multiple);
  }
};

struct BasicReject {
  static constexpr MethodId id{60, 90};
  static constexpr std::string_view name = "basic.reject";
  std::uint64_t delivery_tag = 0;
  bool requeue = true;
  template <class S, class V> WARREN_ALWAYS_INLINE static void fields(S& s, V& v) {
    v.longlong("delivery_tag", s.delivery_tag);
    v.bit("requeue", s.requeue);
  }
};

struct BasicRecover {
  using Ok = BasicRecoverOk;  // the one method that answers it
  static constexpr MethodId id{60, 110};
  static constexpr std::string_view name = "basic.recover";
  bool requeue = false;
  template <class S, class V> static void fields(S& s, V& v) { v.bit("requeue", s.requeue); }
};

struct BasicRecoverOk {
  static constexpr MethodId id{60, 111};
  static constexpr std::string_view name = "basic.recover-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

struct BasicNack {
  static constexpr MethodId id{60, 120};
  static constexpr std::string_view name = "basic.nack";
  std::uint64_t delivery_tag = 0;
  bool multiple = false;
  bool requeue = true;
  template <class S, class V> WARREN_ALWAYS_INLINE static void fields(S& s, V& v) {
    v.longlong("delivery_tag", s.delivery_tag);
    v.bit("multiple", s.multiple);
    v.bit("requeue", s.requeue);
  }
};

struct ConfirmSelect {
  static constexpr MethodId id{85, 10};
  static constexpr std::string_view name = "confirm.select";
  bool no_wait = false;
  template <class S, class V> static void fields(S& s, V& v) { v.bit("no_wait", s.no_wait); }
};

struct ConfirmSelectOk {
  static constexpr MethodId id{85, 11};
  static constexpr std::string_view name = "confirm.select-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

}  // namespace warren::wire
