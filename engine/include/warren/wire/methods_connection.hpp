// connection.* methods (class 10). Each struct names its fields once, in wire order, through
// `fields(self, visitor)`; the codec's visitors size, encode, decode and print from that list.
// Text and table fields are views: into the frame when decoded, into the caller's data when
// encoded.
#pragma once

#include <cstdint>
#include <string_view>

#include "warren/wire/field_table.hpp"
#include "warren/wire/method_id.hpp"

namespace warren::wire {

struct ConnectionStart {
  static constexpr MethodId id{10, 10};
  static constexpr std::string_view name = "connection.start";
  std::uint8_t version_major = 0;
  std::uint8_t version_minor = 9;
  TableRef server_properties{};
  std::string_view mechanisms{};  // space-separated
  std::string_view locales{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.octet("version_major", s.version_major);
    v.octet("version_minor", s.version_minor);
    v.table("server_properties", s.server_properties);
    v.longstr("mechanisms", s.mechanisms);
    v.longstr("locales", s.locales);
  }
};

struct ConnectionStartOk {
  static constexpr MethodId id{10, 11};
  static constexpr std::string_view name = "connection.start-ok";
  TableRef client_properties{};
  std::string_view mechanism{};
  std::string_view response{};  // a secret: the printer never shows it
  std::string_view locale{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.table("client_properties", s.client_properties);
    v.shortstr("mechanism", s.mechanism);
    v.secret_longstr("response", s.response);
    v.shortstr("locale", s.locale);
  }
};

struct ConnectionSecure {
  static constexpr MethodId id{10, 20};
  static constexpr std::string_view name = "connection.secure";
  std::string_view challenge{};
  template <class S, class V> static void fields(S& s, V& v) { v.longstr("challenge", s.challenge); }
};

struct ConnectionSecureOk {
  static constexpr MethodId id{10, 21};
  static constexpr std::string_view name = "connection.secure-ok";
  std::string_view response{};
  template <class S, class V> static void fields(S& s, V& v) { v.secret_longstr("response", s.response); }
};

struct ConnectionTune {
  static constexpr MethodId id{10, 30};
  static constexpr std::string_view name = "connection.tune";
  std::uint16_t channel_max = 0;
  std::uint32_t frame_max = 0;
  std::uint16_t heartbeat = 0;  // seconds
  template <class S, class V> static void fields(S& s, V& v) {
    v.short_("channel_max", s.channel_max);
    v.long_("frame_max", s.frame_max);
    v.short_("heartbeat", s.heartbeat);
  }
};

struct ConnectionTuneOk {
  static constexpr MethodId id{10, 31};
  static constexpr std::string_view name = "connection.tune-ok";
  std::uint16_t channel_max = 0;
  std::uint32_t frame_max = 0;
  std::uint16_t heartbeat = 0;  // seconds
  template <class S, class V> static void fields(S& s, V& v) {
    v.short_("channel_max", s.channel_max);
    v.long_("frame_max", s.frame_max);
    v.short_("heartbeat", s.heartbeat);
  }
};

struct ConnectionOpen {
  static constexpr MethodId id{10, 40};
  static constexpr std::string_view name = "connection.open";
  std::string_view virtual_host = "/";
  template <class S, class V> static void fields(S& s, V& v) {
    v.shortstr("virtual_host", s.virtual_host);
    v.reserved_shortstr();  // capabilities
    v.reserved_bit();       // insist
  }
};

struct ConnectionOpenOk {
  static constexpr MethodId id{10, 41};
  static constexpr std::string_view name = "connection.open-ok";
  template <class S, class V> static void fields(S&, V& v) { v.reserved_shortstr(); }  // known-hosts
};

struct ConnectionClose {
  static constexpr MethodId id{10, 50};
  static constexpr std::string_view name = "connection.close";
  std::uint16_t reply_code = 0;
  std::string_view reply_text{};
  std::uint16_t class_id = 0;  // the method that caused the close, 0 if none
  std::uint16_t method_id = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v.short_("reply_code", s.reply_code);
    v.shortstr("reply_text", s.reply_text);
    v.short_("class_id", s.class_id);
    v.short_("method_id", s.method_id);
  }
};

struct ConnectionCloseOk {
  static constexpr MethodId id{10, 51};
  static constexpr std::string_view name = "connection.close-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

struct ConnectionBlocked {
  static constexpr MethodId id{10, 60};
  static constexpr std::string_view name = "connection.blocked";
  std::string_view reason{};
  template <class S, class V> static void fields(S& s, V& v) { v.shortstr("reason", s.reason); }
};

struct ConnectionUnblocked {
  static constexpr MethodId id{10, 61};
  static constexpr std::string_view name = "connection.unblocked";
  template <class S, class V> static void fields(S&, V&) {}
};

// RabbitMQ's extension (class 10, methods 70/71): a new secret (an OAuth 2 token, say) for
// the open connection, in place of the one it logged in with. The broker re-authenticates
// the same user with it and answers update-secret-ok, or closes the connection.
struct ConnectionUpdateSecret {
  static constexpr MethodId id{10, 70};
  static constexpr std::string_view name = "connection.update-secret";
  std::string_view new_secret{};  // a secret: the printer never shows it
  std::string_view reason{};
  template <class S, class V> static void fields(S& s, V& v) {
    v.secret_longstr("new_secret", s.new_secret);
    v.shortstr("reason", s.reason);
  }
};

struct ConnectionUpdateSecretOk {
  static constexpr MethodId id{10, 71};
  static constexpr std::string_view name = "connection.update-secret-ok";
  template <class S, class V> static void fields(S&, V&) {}
};

}  // namespace warren::wire
