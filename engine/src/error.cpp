#include "warren/error.hpp"

namespace warren {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "warren"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::frame_too_large: return "frame too large";
      case errc::frame_too_small: return "frame too small";
      case errc::unknown_frame_type: return "unknown frame type";
      case errc::bad_frame_end: return "protocol error";
      case errc::malformed_payload: return "malformed frame payload";
      case errc::unknown_method: return "unknown method";
      case errc::unknown_field_type: return "unknown field type";
      case errc::table_too_deep: return "field table nested too deep";
      case errc::string_too_long: return "string too long";
      case errc::protocol_version_mismatch: return "protocol version mismatch";
      case errc::protocol_error: return "protocol error";
      case errc::timeout: return "timed out";
      case errc::connection_lost: return "connection lost";
      case errc::connection_closed: return "connection closed";
      case errc::channel_closed: return "channel closed";
      case errc::access_refused: return "access refused";
      case errc::not_found: return "not found";
      case errc::resource_locked: return "resource locked";
      case errc::precondition_failed: return "precondition failed";
      case errc::invalid_url: return "invalid URL";
      case errc::tls_failed: return "TLS handshake failed";
      case errc::tls_config: return "TLS configuration refused";
      case errc::consumer_cancelled: return "consumer cancelled";
      case errc::invalid_argument: return "invalid argument";
      case errc::nacked: return "nacked by the broker";
      case errc::unroutable: return "unroutable";
      case errc::ack_timeout: return "delivery acknowledgement timed out";
      case errc::message_too_large: return "message too large";
      case errc::credentials_unavailable: return "credentials unavailable";
    }
    return "unknown warren error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

Scope scope(const Error& e) noexcept {
  if (e.connection_ended) return Scope::connection;
  if (e.channel_close) return Scope::channel;  // the broker's channel.close, or a request timeout
  // 200 is a close or cancel this side asked for; 312 a returned publish.
  if (e.reply_code != 0 && e.reply_code != 200 && e.reply_code != 312) return Scope::connection;
  if (e.code.category() != error_category()) return Scope::connection;  // a system error from the stream
  switch (static_cast<errc>(e.code.value())) {
    case errc::invalid_argument:
    case errc::string_too_long:
    case errc::nacked:
    case errc::unroutable:
    case errc::message_too_large:  // refused before it was sent; the broker's own refusal closed the channel
    case errc::consumer_cancelled:
    case errc::not_found:        // a local lookup (no such consumer): the broker's 404 has a reply code
    case errc::resource_locked:  // a local limit: no free channel number, too many waiting publishes
    case errc::timeout:          // a publish's or a call's own deadline; one that closed a channel says so
      return Scope::request;
    case errc::channel_closed:
      return Scope::channel;
    default:
      return Scope::connection;
  }
}

bool is_permanent(const Error& e) noexcept {
  // An ack timeout is a 406 that a new subscription gets past (the message was requeued).
  if (e.code == make_error_code(errc::ack_timeout)) return false;
  if (e.reply_code == 403 || e.reply_code == 406 || e.reply_code == 530) return true;
  if (e.code.category() != error_category()) return false;
  switch (static_cast<errc>(e.code.value())) {
    case errc::access_refused:
    case errc::precondition_failed:
    case errc::invalid_argument:
    case errc::string_too_long:
    case errc::invalid_url:
    case errc::tls_config:
    case errc::message_too_large:
      return true;
    default:
      return false;
  }
}

const char* to_string(Sent sent) noexcept {
  switch (sent) {
    case Sent::no: return "no";
    case Sent::maybe: return "maybe";
    case Sent::unknown: break;
  }
  return "unknown";
}

std::string Error::to_string() const {
  std::string text = code.message();
  if (reply_code != 0) text += " (" + std::to_string(reply_code) + ")";
  if (!detail.empty()) text += ": " + detail;
  return text;
}

}  // namespace warren
