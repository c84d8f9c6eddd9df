// Internal: the spans one connection records for an observer that wants them (observer.hpp):
// a publish's from its call to its outcome, a basic.get's from its request to its message, a
// push consumer's callback, a settle. Made only when the observer asks for spans, so a
// connection without one pays one untaken branch per message. Loop thread only. Not installed.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "warren/client/observer.hpp"
#include "warren/engine/events.hpp"
#include "warren/wire/methods_basic.hpp"

namespace warren::client::detail {

class ConnectionSpans {
 public:
  // `peer` is the connection's "host:port", read when a span is handed over.
  ConnectionSpans(std::shared_ptr<Observer> observer, const std::string& peer);
  ConnectionSpans(const ConnectionSpans&) = delete;
  ConnectionSpans& operator=(const ConnectionSpans&) = delete;

  // The context a publish writes into its headers: its own span's, a child of the caller's,
  // or a new trace's root. Kept until sent() learns the publish's id.
  [[nodiscard]] TraceContext begin_send(const TraceContext& caller);
  // The publish begin_send was for: accepted (its span ends at its PublishDone) or refused
  // (its span ends now, failed). Nothing when begin_send was not asked first.
  void sent(engine::ChannelId channel, const Result<engine::PublishId>& id, const wire::BasicPublish& m,
            const wire::BasicProperties& properties, std::size_t body_bytes);
  void settled(const engine::PublishDone& done);

  // A push consumer's callback runs between these; the span is the callback's time.
  void begin_process(const engine::Message& m, std::string_view queue);
  void end_process();
  // The span of the callback running for this delivery, if one is.
  [[nodiscard]] std::optional<TraceContext> processing(engine::ChannelId channel, std::uint64_t delivery_tag) const;

  // A basic.get's message, asked for at `asked`.
  void received(const engine::Message& m, std::string_view queue, std::chrono::system_clock::time_point asked);
  // An ack, nack or reject (`operation`), sent or refused.
  void settled_delivery(std::string_view operation, engine::ChannelId channel, std::uint64_t delivery_tag,
                        const Error* refused);

  // The connection ended: the publishes still in flight end failed, with `cause`.
  void ended(const Error& cause);

 private:
  // A span's text that must outlive the call that started it.
  struct Pending {
    TraceContext context;
    std::optional<TraceContext> parent;
    std::string tracestate;  // the contexts' tracestate views it
    std::string exchange, routing_key, message_id, correlation_id;
    std::size_t body_bytes = 0;
    std::chrono::system_clock::time_point start;
    engine::ChannelId channel = 0;
  };
  void hand_over(const Pending& p, const Error* error) const;
  [[nodiscard]] SpanRecord about(const engine::Message& m, std::string_view queue) const;

  std::shared_ptr<Observer> observer_;
  const std::string& peer_;
  std::optional<Pending> next_send_;  // begin_send's, until sent()
  std::map<std::pair<engine::ChannelId, engine::PublishId>, Pending> sending_;
  std::optional<SpanRecord> processing_;  // the callback running, its end not yet known
  // Its queue's name, copied: the subscription that held it may move while the callback runs
  // (the callback may subscribe or end subscriptions). Reused, so no allocation per delivery.
  std::string processing_queue_;
};

}  // namespace warren::client::detail
