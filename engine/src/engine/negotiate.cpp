#include "warren/engine/negotiate.hpp"

#include <algorithm>

#include "warren/wire/byte_io.hpp"
#include "warren/wire/constants.hpp"
#include "warren/wire/field_table.hpp"

namespace warren::engine {

std::uint32_t negotiate_limit(std::uint32_t ours, std::uint32_t theirs) noexcept {
  if (ours == 0) return theirs;
  if (theirs == 0) return ours;
  return std::min(ours, theirs);
}

std::uint16_t negotiate_heartbeat(std::uint16_t ours_s, std::uint16_t theirs_s) noexcept {
  if (ours_s == 0 || theirs_s == 0) return std::max(ours_s, theirs_s);
  return std::min(ours_s, theirs_s);
}

std::string_view mechanism_name(Mechanism m) noexcept {
  switch (m) {
    case Mechanism::plain: return "PLAIN";
    case Mechanism::amqplain: return "AMQPLAIN";
    case Mechanism::external: return "EXTERNAL";
  }
  return "PLAIN";
}

bool offers_mechanism(std::string_view offered, Mechanism m) noexcept {
  const std::string_view want = mechanism_name(m);
  while (!offered.empty()) {
    auto space = offered.find(' ');
    auto word = offered.substr(0, space);
    if (word == want) return true;
    if (space == std::string_view::npos) break;
    offered.remove_prefix(space + 1);
  }
  return false;
}

std::string sasl_response(const ConnectionOptions& options) {
  switch (options.mechanism) {
    case Mechanism::plain: {
      std::string r;
      r.reserve(options.user.size() + options.password.size() + 2);
      r.push_back('\0');
      r += options.user;
      r.push_back('\0');
      r += options.password;
      return r;
    }
    case Mechanism::amqplain: {
      wire::FieldTable t;
      t.set("LOGIN", options.user).set("PASSWORD", options.password);
      auto size = wire::encoded_table_size(t);
      if (!size.ok()) return {};
      std::string r(*size, '\0');
      wire::Writer w(reinterpret_cast<std::byte*>(r.data()));
      wire::encode_table_content(w, t);
      return r;
    }
    case Mechanism::external: return {};
  }
  return {};
}

wire::FieldTable client_properties(const ConnectionOptions& o) {
  wire::FieldTable capabilities;
  capabilities.set("publisher_confirms", true)
      .set("consumer_cancel_notify", true)
      .set("connection.blocked", true)
      .set("authentication_failure_close", true)
      .set("basic.nack", true)
      .set("per_consumer_qos", true)
      .set("exchange_exchange_bindings", true);
  wire::FieldTable p;
  p.set("product", std::string("warren"))
      .set("version", std::string("0.1.0"))
      .set("platform", std::string("C++20"))
      .set("capabilities", std::move(capabilities));
  if (!o.connection_name.empty()) p.set("connection_name", o.connection_name);
  for (const auto& e : o.client_properties.entries) p.set(e.key, e.value);
  return p;
}

Error close_error(std::uint16_t reply_code, std::string_view reply_text, std::uint16_t class_id,
                  std::uint16_t method_id, bool channel) {
  errc code = channel ? errc::channel_closed : errc::connection_closed;
  switch (reply_code) {
    case wire::reply::access_refused: code = errc::access_refused; break;
    case wire::reply::not_found: code = errc::not_found; break;
    case wire::reply::resource_locked: code = errc::resource_locked; break;
    case wire::reply::precondition_failed:
      // Two limits RabbitMQ enforces with a 406 and says so only in the text (3.8-4.x):
      // "delivery acknowledgement on channel N timed out. Timeout value used: ..." and
      // "message size N is larger than configured max size M".
      if (reply_text.find("delivery acknowledgement on channel") != std::string_view::npos &&
          reply_text.find("timed out") != std::string_view::npos)
        code = errc::ack_timeout;
      else if (reply_text.find("is larger than configured max size") != std::string_view::npos)
        code = errc::message_too_large;
      else
        code = errc::precondition_failed;
      break;
    default: break;
  }
  Error e = make_error(code, std::string(reply_text));
  e.reply_code = reply_code;
  e.class_id = class_id;
  e.method_id = method_id;
  e.channel_close = channel;
  return e;
}

}  // namespace warren::engine
