#include "warren/engine/describe.hpp"

#include "warren/wire/printing.hpp"

namespace warren::engine {
namespace {

std::string error_text(const Error& e) {
  // Appended piece by piece: GCC 12 at -O3 warns falsely on `"literal" + std::string&&`.
  std::string out = e.code ? e.code.message() : "ok";
  if (e.reply_code) {
    out += ' ';
    out += std::to_string(e.reply_code);
  }
  if (!e.detail.empty()) {
    out += ": ";
    out += e.detail;
  }
  return out;
}

std::string message_text(const Message& m) {
  std::string out = "ch" + std::to_string(m.channel);
  if (!m.consumer_tag.empty()) out += " tag=" + wire::quote(m.consumer_tag);
  if (m.delivery_tag) out += " delivery_tag=" + std::to_string(m.delivery_tag);
  if (m.redelivered) out += " redelivered";
  out += " exchange=" + wire::quote(m.exchange) + " routing_key=" + wire::quote(m.routing_key);
  if (m.properties) {
    auto props = wire::to_string(*m.properties);
    if (props != "{}") out += " properties=" + props;
  }
  out += " body=" + wire::quote({reinterpret_cast<const char*>(m.body.data()), m.body.size()});
  return out;
}

}  // namespace

std::string returned_detail(std::string_view reply_text, std::string_view exchange, std::string_view routing_key) {
  std::string out(reply_text);
  out += exchange.empty() ? " (the default exchange" : " (exchange ";
  if (!exchange.empty()) out += wire::quote(exchange);
  out += ", routing key ";
  out += wire::quote(routing_key);
  out += ')';
  return out;
}

std::string_view to_string(PublishOutcome outcome) {
  switch (outcome) {
    case PublishOutcome::written: return "written";
    case PublishOutcome::confirmed: return "confirmed";
    case PublishOutcome::nacked: return "nacked";
    case PublishOutcome::returned: return "returned";
    case PublishOutcome::timed_out: return "timed_out";
    case PublishOutcome::failed: return "failed";
  }
  return "?";
}

std::string to_string(const Event& event) {
  return std::visit(
      [](const auto& e) -> std::string {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, Connected>)
          return "connected(channel_max=" + std::to_string(e.channel_max) + ", frame_max=" +
                 std::to_string(e.frame_max_bytes) + ", heartbeat=" + std::to_string(e.heartbeat_s) + ")";
        else if constexpr (std::is_same_v<E, Blocked>) return "blocked(" + wire::quote(e.reason) + ")";
        else if constexpr (std::is_same_v<E, Unblocked>) return "unblocked";
        else if constexpr (std::is_same_v<E, Closed>) return "closed(" + error_text(e.cause) + ")";
        else if constexpr (std::is_same_v<E, Writable>) return "writable";
        else if constexpr (std::is_same_v<E, ChannelOpened>) return "channel-opened(ch" + std::to_string(e.channel) + ")";
        else if constexpr (std::is_same_v<E, ChannelClosed>)
          return "channel-closed(ch" + std::to_string(e.channel) + ", " + error_text(e.cause) + ")";
        else if constexpr (std::is_same_v<E, RequestDone>)
          return "done(ch" + std::to_string(e.channel) + " #" + std::to_string(e.request) + " " + wire::to_string(e.reply) + ")";
        else if constexpr (std::is_same_v<E, RequestFailed>)
          return "failed(ch" + std::to_string(e.channel) + " #" + std::to_string(e.request) + ", " + error_text(e.cause) + ")";
        else if constexpr (std::is_same_v<E, PublishDone>) {
          std::string out = "publish(ch" + std::to_string(e.channel) + " p" + std::to_string(e.first);
          if (e.last != e.first) out += "-p" + std::to_string(e.last);
          out += ' ';
          out += to_string(e.outcome);
          if (e.cause.code || e.cause.reply_code) out += ", " + error_text(e.cause);
          return out + ")";
        } else if constexpr (std::is_same_v<E, Delivery>) return "delivery(" + message_text(e.message) + ")";
        else if constexpr (std::is_same_v<E, GetOk>)
          return "get-ok(#" + std::to_string(e.request) + " left=" + std::to_string(e.message_count) + " " +
                 message_text(e.message) + ")";
        else if constexpr (std::is_same_v<E, Returned>)
          return "returned(" + std::to_string(e.reply_code) + " " + wire::quote(e.reply_text) + " " + message_text(e.message) + ")";
        else if constexpr (std::is_same_v<E, ConsumerCancelled>)
          return "cancelled(ch" + std::to_string(e.channel) + " " + wire::quote(e.consumer_tag) +
                 (e.by_broker ? " by broker)" : ")");
        else if constexpr (std::is_same_v<E, ChannelFlow>)
          return "flow(ch" + std::to_string(e.channel) + (e.active ? " active)" : " paused)");
      },
      event);
}

}  // namespace warren::engine
