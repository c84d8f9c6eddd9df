#include "connection_spans.hpp"

#include "traced_properties.hpp"

namespace warren::client::detail {

namespace {

using Clock = std::chrono::system_clock;

std::string_view text_or_empty(const std::optional<std::string_view>& v) { return v.value_or(std::string_view{}); }

// "{operation} {destination}", the destination left out where there is none (the conventions').
std::string span_name(std::string_view operation, std::string_view destination) {
  std::string name(operation);
  if (!destination.empty()) name.append(" ").append(destination);
  return name;
}

}  // namespace

ConnectionSpans::ConnectionSpans(std::shared_ptr<Observer> observer, const std::string& peer)
    : observer_(std::move(observer)), peer_(peer) {}

TraceContext ConnectionSpans::begin_send(const TraceContext& caller) {
  Pending p;
  p.start = Clock::now();
  if (caller.valid()) {
    p.tracestate = std::string(caller.tracestate);
    p.parent = caller;
    p.parent->tracestate = p.tracestate;
    p.context = caller.child();
  } else {
    p.context = TraceContext::new_root();
  }
  next_send_ = std::move(p);
  // Re-pointed at next_send_'s text, which the publish call reads before sent() moves it.
  next_send_->context.tracestate = next_send_->tracestate;
  if (next_send_->parent) next_send_->parent->tracestate = next_send_->tracestate;
  return next_send_->context;
}

void ConnectionSpans::sent(engine::ChannelId channel, const Result<engine::PublishId>& id, const wire::BasicPublish& m,
                           const wire::BasicProperties& properties, std::size_t body_bytes) {
  if (!next_send_) return;
  Pending p = std::move(*next_send_);
  next_send_.reset();
  p.context.tracestate = p.tracestate;
  if (p.parent) p.parent->tracestate = p.tracestate;
  p.exchange = std::string(m.exchange);
  p.routing_key = std::string(m.routing_key);
  p.message_id = std::string(text_or_empty(properties.message_id));
  p.correlation_id = std::string(text_or_empty(properties.correlation_id));
  p.body_bytes = body_bytes;
  p.channel = channel;
  if (!id.ok()) {
    hand_over(p, &id.error());
    return;
  }
  auto [it, _] = sending_.insert_or_assign(std::pair{channel, *id}, std::move(p));
  // Moved into the map: its views point at the map's copy of the text from now on.
  it->second.context.tracestate = it->second.tracestate;
  if (it->second.parent) it->second.parent->tracestate = it->second.tracestate;
}

void ConnectionSpans::settled(const engine::PublishDone& done) {
  auto first = sending_.lower_bound({done.channel, done.first});
  auto last = sending_.upper_bound({done.channel, done.last});
  if (first == last) return;
  const bool failed = done.outcome != engine::PublishOutcome::confirmed && done.outcome != engine::PublishOutcome::written;
  Error why = done.cause;
  if (done.outcome == engine::PublishOutcome::nacked) why.code = make_error_code(errc::nacked);
  if (done.outcome == engine::PublishOutcome::returned) why.code = make_error_code(errc::unroutable);
  for (auto it = first; it != last; ++it) hand_over(it->second, failed ? &why : nullptr);
  sending_.erase(first, last);
}

void ConnectionSpans::hand_over(const Pending& p, const Error* error) const {
  const std::string name = span_name("publish", p.exchange);
  observer_->on_span(SpanRecord{.name = name,
                                .kind = SpanKind::producer,
                                .operation_type = "send",
                                .operation_name = "publish",
                                .context = p.context,
                                .parent = p.parent,
                                .start = p.start,
                                .end = Clock::now(),
                                .connection = peer_,
                                .channel = p.channel,
                                .exchange = p.exchange,
                                .routing_key = p.routing_key,
                                .message_id = p.message_id,
                                .correlation_id = p.correlation_id,
                                .body_bytes = p.body_bytes,
                                .error = error});
}

// What a consumer-side span says of the message it concerns (views into it), linked to the
// context the message carried.
SpanRecord ConnectionSpans::about(const engine::Message& m, std::string_view queue) const {
  static const wire::BasicProperties none{};
  const wire::BasicProperties& properties = m.properties ? *m.properties : none;
  return SpanRecord{.link = trace_of(properties),
                    .connection = peer_,
                    .channel = m.channel,
                    .exchange = m.exchange,
                    .routing_key = m.routing_key,
                    .queue = queue,
                    .delivery_tag = m.delivery_tag,
                    .message_id = text_or_empty(properties.message_id),
                    .correlation_id = text_or_empty(properties.correlation_id),
                    .body_bytes = m.body.size()};
}

void ConnectionSpans::begin_process(const engine::Message& m, std::string_view queue) {
  // Its views are the delivery's, valid until the callback returns, when the span ends; the
  // queue's name is this object's own.
  processing_queue_.assign(queue);
  SpanRecord span = about(m, processing_queue_);
  span.kind = SpanKind::consumer;
  span.operation_type = "process";
  span.operation_name = "process";
  span.parent = span.link;
  span.context = span.link ? span.link->child() : TraceContext::new_root();
  span.start = Clock::now();
  processing_ = span;
}

void ConnectionSpans::end_process() {
  if (!processing_) return;
  SpanRecord span = *processing_;
  processing_.reset();
  const std::string name = span_name("process", span.queue);
  span.name = name;
  span.end = Clock::now();
  observer_->on_span(span);
}

std::optional<TraceContext> ConnectionSpans::processing(engine::ChannelId channel, std::uint64_t delivery_tag) const {
  if (!processing_ || processing_->channel != channel || processing_->delivery_tag != delivery_tag) return std::nullopt;
  return processing_->context;
}

void ConnectionSpans::received(const engine::Message& m, std::string_view queue, Clock::time_point asked) {
  // A pull is the application's own operation: a root here (warren knows no caller's span),
  // linked to the producer's.
  SpanRecord span = about(m, queue);
  const std::string name = span_name("get", queue);
  span.name = name;
  span.kind = SpanKind::client;
  span.operation_type = "receive";
  span.operation_name = "get";
  span.context = TraceContext::new_root();
  span.start = asked;
  span.end = Clock::now();
  observer_->on_span(span);
}

void ConnectionSpans::settled_delivery(std::string_view operation, engine::ChannelId channel,
                                       std::uint64_t delivery_tag, const Error* refused) {
  // Inside the delivery's callback: a child of its process span, linked to the producer's.
  // Elsewhere warren no longer knows the delivery: a root span.
  const SpanRecord* in = processing_ && processing_->channel == channel && processing_->delivery_tag == delivery_tag
                             ? &*processing_
                             : nullptr;
  const auto now = Clock::now();
  const std::string name = span_name(operation, in ? in->queue : std::string_view{});
  observer_->on_span(SpanRecord{.name = name,
                                .kind = SpanKind::client,
                                .operation_type = "settle",
                                .operation_name = operation,
                                .context = in ? in->context.child() : TraceContext::new_root(),
                                .parent = in ? std::optional<TraceContext>(in->context) : std::nullopt,
                                .link = in ? in->parent : std::nullopt,
                                .start = now,
                                .end = now,
                                .connection = peer_,
                                .channel = channel,
                                .exchange = in ? in->exchange : std::string_view{},
                                .routing_key = in ? in->routing_key : std::string_view{},
                                .queue = in ? in->queue : std::string_view{},
                                .delivery_tag = delivery_tag,
                                .error = refused});
}

void ConnectionSpans::ended(const Error& cause) {
  next_send_.reset();
  auto left = std::move(sending_);
  sending_.clear();
  for (const auto& [key, p] : left) hand_over(p, &cause);
}

}  // namespace warren::client::detail
