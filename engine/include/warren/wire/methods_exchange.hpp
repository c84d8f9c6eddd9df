// exchange.* methods (class 40); see methods_connection.hpp for the fields() convention.
#pragma once

#include <string_view>

#include "warren/wire/field_table.hpp"
#include "warren/wire/method_id.hpp"

namespace warren::wire {

// The answers the requests below name (`using Ok`).
struct ExchangeDeclareOk;
struct ExchangeDeleteOk;
struct ExchangeBindOk;
struct ExchangeUnbindOk;

struct ExchangeDeclare {
  using Ok = ExchangeDeclareOk;  // the one method that answers it
  static constexpr MethodId id{40, 10};
  static constexpr std::string_view name = "exchange.declare";
  std::string_view exchange{};
  std::string_view type = "direct";
  bool passive = false;
  bool durable = false;
  bool auto_delete = false;
  bool internal = false;
  bool no_wait = false;
  TableRef arguments{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();  // ticket
    v.shortstr("exchange", s.exchange);
    v.shortstr("type", s.type);
    v.bit("passive", s.passive);
    v.bit("durable", s.durable);
    v.bit("auto_delete", s.auto_delete);
    v.bit("internal", s.internal);
    v.bit("no_wait", s.no_wait);
    v.table("arguments", s.arguments);
  }
};

struct ExchangeDeclareOk {
  static constexpr MethodId id{40, 11};
  static constexpr std::string_view name = "exchange.declare-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

struct ExchangeDelete {
  using Ok = ExchangeDeleteOk;  // the one method that answers it
  static constexpr MethodId id{40, 20};
  static constexpr std::string_view name = "exchange.delete";
  std::string_view exchange{};
  bool if_unused = false;
  bool no_wait = false;
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("exchange", s.exchange);
    v.bit("if_unused", s.if_unused);
    v.bit("no_wait", s.no_wait);
  }
};

struct ExchangeDeleteOk {
  static constexpr MethodId id{40, 21};
  static constexpr std::string_view name = "exchange.delete-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

struct ExchangeBind {
  using Ok = ExchangeBindOk;  // the one method that answers it
  static constexpr MethodId id{40, 30};
  static constexpr std::string_view name = "exchange.bind";
  std::string_view destination{};
  std::string_view source{};
  std::string_view routing_key{};
  bool no_wait = false;
  TableRef arguments{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("destination", s.destination);
    v.shortstr("source", s.source);
    v.shortstr("routing_key", s.routing_key);
    v.bit("no_wait", s.no_wait);
    v.table("arguments", s.arguments);
  }
};

struct ExchangeBindOk {
  static constexpr MethodId id{40, 31};
  static constexpr std::string_view name = "exchange.bind-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

struct ExchangeUnbind {
  using Ok = ExchangeUnbindOk;  // the one method that answers it
  static constexpr MethodId id{40, 40};
  static constexpr std::string_view name = "exchange.unbind";
  std::string_view destination{};
  std::string_view source{};
  std::string_view routing_key{};
  bool no_wait = false;
  TableRef arguments{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.reserved_short();
    v.shortstr("destination", s.destination);
    v.shortstr("source", s.source);
    v.shortstr("routing_key", s.routing_key);
    v.bit("no_wait", s.no_wait);
    v.table("arguments", s.arguments);
  }
};

// 51, not 41: the id RabbitMQ and every client use for unbind-ok.
struct ExchangeUnbindOk {
  static constexpr MethodId id{40, 51};
  static constexpr std::string_view name = "exchange.unbind-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

}  // namespace warren::wire
