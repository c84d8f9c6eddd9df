// warren's errors: an std::error_code category (so Asio users get the type they expect)
// plus an Error value that carries the specific detail and, for broker closes, the reply code.
// No I/O, no logging: an Error is data handed back to the caller.
#pragma once

#include <cstdint>
#include <string>
#include <system_error>

namespace warren {

enum class errc : int {
  // codec and framing
  frame_too_large = 1,        // a frame larger than the negotiated frame_max
  frame_too_small,            // a frame shorter than its type's fixed part
  unknown_frame_type,
  bad_frame_end,              // the byte after the payload is not 0xCE
  malformed_payload,          // a field runs past its frame, a bad length, trailing bytes
  unknown_method,             // a class/method pair outside the supported classes
  unknown_field_type,         // a field-table value tag outside RabbitMQ's type set
  table_too_deep,             // nested tables/arrays beyond max_table_depth
  string_too_long,            // a short string over 255 bytes, a long string over 4 GiB
  protocol_version_mismatch,  // the broker answered our header with its own
  protocol_error,             // a valid frame in the wrong place
  // connection and channel life (used by the engine and above)
  timeout,
  connection_lost,
  connection_closed,
  channel_closed,
  access_refused,
  not_found,
  resource_locked,
  precondition_failed,
  // configuration
  invalid_url,  // a connection URL that cannot be honoured exactly as written
  // TLS
  tls_failed,   // the handshake failed: certificate not trusted, expired, wrong name, ...
  tls_config,   // a CA, certificate or key given in the options could not be used
  // client layers
  consumer_cancelled,  // the broker cancelled a subscription (queue deleted, node down)
  invalid_argument,    // local misuse: a value or a call that cannot be sent as written
  // publish outcomes that are not a success
  nacked,              // the broker refused a confirmed publish (basic.nack)
  unroutable,          // a mandatory publish no queue took (basic.return, reply 312 NO_ROUTE)
  // limits a broker enforces
  ack_timeout,          // the broker closed the channel: a delivery stayed unacknowledged past
                        // its consumer_timeout (406; redelivered to the next consumer)
  message_too_large,    // a publish over max_body_bytes (refused before it is sent), or over the
                        // broker's max_message_size (406: it closed the channel)
  credentials_unavailable,  // the credentials provider failed (ClientOptions::credentials)
};

[[nodiscard]] const std::error_category& error_category() noexcept;

[[nodiscard]] inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// A failed publish: whether its bytes can have reached the broker, which decides whether a
// resend can duplicate it.
enum class Sent : std::uint8_t {
  unknown,  // not a publish's failure, or not known
  no,       // it never left the client (held behind connection.blocked, refused, no connection):
            // the broker cannot have it; a resend cannot duplicate it
  maybe,    // written (or queued to be) and no confirm came: the broker may have it, and may
            // deliver it; a resend may duplicate it
};
[[nodiscard]] const char* to_string(Sent sent) noexcept;

// One failure, with what the category's message cannot say: which byte, which field, which
// limit; for a broker close, its reply code and text and the method it blamed.
struct Error {
  std::error_code code{};
  std::string detail{};
  std::uint16_t reply_code = 0;  // AMQP reply code, 0 when the error did not come from a close
  std::uint16_t class_id = 0;
  std::uint16_t method_id = 0;
  // What the error put out of use (see scope()): set where that is known, not compared.
  bool channel_close = false;     // a channel (the broker's channel.close, a request timeout)
  bool connection_ended = false;  // the whole connection (its latched cause, a failed dial)
  Sent sent = Sent::unknown;      // a failed publish: whether the broker can have it

  // "protocol error: frame end byte 0x41 is not 0xCE"
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Error& a, const Error& b) {
    return a.code == b.code && a.detail == b.detail && a.reply_code == b.reply_code && a.class_id == b.class_id &&
           a.method_id == b.method_id;
  }
};

[[nodiscard]] inline Error make_error(errc e, std::string detail) {
  return Error{make_error_code(e), std::move(detail)};
}

// What an error put out of use. A retry loop and the Session read the same facts from here.
enum class Scope : std::uint8_t {
  request,     // this call only: its channel and connection are still usable (a nack, a 312,
               // local misuse, a publish's or an RPC call's own deadline)
  channel,     // the channel is closed (the broker's channel.close, a request that timed out)
  connection,  // the whole connection is gone (5xx, 320, a lost stream, a failed dial)
};
[[nodiscard]] Scope scope(const Error& e) noexcept;

// True when trying the same thing again cannot succeed by itself: refused credentials or
// permissions (403), a missing vhost (530), an inequivalent redeclare (406), local misuse,
// a URL or TLS setting that cannot work. A 404 is not permanent (someone may declare it); a
// timeout, a lost connection, a nack or a 320 are not.
[[nodiscard]] bool is_permanent(const Error& e) noexcept;

}  // namespace warren

template <>
struct std::is_error_code_enum<warren::errc> : std::true_type {};
