// queue.* methods (class 50); see methods_connection.hpp for the fields() convention.
#pragma once

#include <cstdint>
#include <string_view>

#include "warren/wire/field_table.hpp"
#include "warren/wire/method_id.hpp"

namespace warren::wire {

// The answers the requests below name (`using Ok`).
struct QueueDeclareOk;
struct QueueBindOk;
struct QueueUnbindOk;
struct QueuePurgeOk;
struct QueueDeleteOk;

struct QueueDeclare {
  using Ok = QueueDeclareOk;  // the one method that answers it
  static constexpr MethodId id{50, 10};
  static constexpr std::string_view name = "queue.declare";
  std::string_view queue{};  // empty: the broker names it
  bool passive = false;
  bool durable = false;
  bool exclusive = false;
  bool auto_delete = false;
  bool no_wait = false;
  TableRef arguments{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("queue", s.queue);
    v.bit("passive", s.passive);
    v.bit("durable", s.durable);
    v.bit("exclusive", s.exclusive);
    v.bit("auto_delete", s.auto_delete);
    v.bit("no_wait", s.no_wait);
    v.table("arguments", s.arguments);
  }
};

struct QueueDeclareOk {
  static constexpr MethodId id{50, 11};
  static constexpr std::string_view name = "queue.declare-ok";
  std::string_view queue{};
  std::uint32_t message_count = 0;
  std::uint32_t consumer_count = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v.shortstr("queue", s.queue);
    v.long_("message_count", s.message_count);
    v.long_("consumer_count", s.consumer_count);
  }
};

struct QueueBind {
  using Ok = QueueBindOk;  // the one method that answers it
  static constexpr MethodId id{50, 20};
  static constexpr std::string_view name = "queue.bind";
  std::string_view queue{};
  std::string_view exchange{};
  std::string_view routing_key{};
  bool no_wait = false;
  TableRef arguments{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("queue", s.queue);
    v.shortstr("exchange", s.exchange);
    v.shortstr("routing_key", s.routing_key);
    v.bit("no_wait", s.no_wait);
    v.table("arguments", s.arguments);
  }
};

struct QueueBindOk {
  static constexpr MethodId id{50, 21};
  static constexpr std::string_view name = "queue.bind-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

struct QueuePurge {
  using Ok = QueuePurgeOk;  // the one method that answers it
  static constexpr MethodId id{50, 30};
  static constexpr std::string_view name = "queue.purge";
  std::string_view queue{};
  bool no_wait = false;
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("queue", s.queue);
    v.bit("no_wait", s.no_wait);
  }
};

struct QueuePurgeOk {
  static constexpr MethodId id{50, 31};
  static constexpr std::string_view name = "queue.purge-ok";
  std::uint32_t message_count = 0;
  template <class S, class V> static void fields(S& s, V& v) { v.long_("message_count", s.message_count); }
};

struct QueueDelete {
  using Ok = QueueDeleteOk;  // the one method that answers it
  static constexpr MethodId id{50, 40};
  static constexpr std::string_view name = "queue.delete";
  std::string_view queue{};
  bool if_unused = false;
  bool if_empty = false;
  bool no_wait = false;
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("queue", s.queue);
    v.bit("if_unused", s.if_unused);
    v.bit("if_empty", s.if_empty);
    v.bit("no_wait", s.no_wait);
  }
};

struct QueueDeleteOk {
  static constexpr MethodId id{50, 41};
  static constexpr std::string_view name = "queue.delete-ok";
  std::uint32_t message_count = 0;
  template <class S, class V> static void fields(S& s, V& v) { v.long_("message_count", s.message_count); }
};

// queue.unbind has no no-wait flag in 0-9-1.
struct QueueUnbind {
  using Ok = QueueUnbindOk;  // the one method that answers it
  static constexpr MethodId id{50, 50};
  static constexpr std::string_view name = "queue.unbind";
  std::string_view queue{};
  std::string_view exchange{};
  std::string_view routing_key{};
  TableRef arguments{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("queue", s.queue);
    v.shortstr("exchange", s.exchange);
    v.shortstr("routing_key", s.routing_key);
    v.table("arguments", s.arguments);
  }
};

struct QueueUnbindOk {
  static constexpr MethodId id{50, 51};
  static constexpr std::string_view name = "queue.unbind-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

}  // namespace warren::wire
