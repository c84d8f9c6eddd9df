// The log: a stream queue "<prefix>.log.<name>" (x-queue-type stream, x-max-length-bytes from
// the layer's stream_max_bytes when it is not 0). An entry's x-stream-offset is its id and
// resume token.
// - append() publishes (confirmed), then reads the stream's last chunk back to find the
//   entry's offset by its message_id: AMQP 0-9-1 never reports where a publish landed, so this
//   costs a round trip (more when other appenders' chunks came after it: it then reads back
//   further, a widening window at a time, until it finds its own entry). A stream that
//   delivers nothing for a while (a leader being elected, a member hung) delays the offset,
//   looked for again every 5 s for up to 60 s after the confirm, and so does a read-back
//   whose channel or connection was lost: the entry is there, so append() is not failed.
// - read() is a catch-up page: it reads the tip first (there is no tip query: consume from
//   "last", take the highest offset), then reads from `from` and is complete when it reaches
//   that tip; a delivery that pauses longer than `idle` hands back an incomplete page (ask
//   again from where it stopped). An empty stream is given `empty_wait` to deliver "last"
//   before it is taken for empty, counted from the broker's consume-ok (a consume it never
//   answers is a timeout, not an empty stream).
// - A trimmed offset is detected, not reported by the broker (it silently starts at the
//   oldest retained entry): the first entry is past the one asked for and the oldest retained
//   is too. read() then fails with reply code 410 and calls on_gap, which can turn it into a
//   snapshot.
// - follow() is a live tail from an offset.
// Stream deliveries are only ever acked, never rejected or nacked: on RabbitMQ 3.10-3.12 a
// reject of a stream delivery closes the whole connection with 540.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "warren/client/message.hpp"
#include "warren/messaging/messaging.hpp"
#include "warren/messaging/subscription.hpp"

namespace warren::messaging {

struct Gap {
  std::uint64_t asked = 0;   // the offset the reader asked for
  std::uint64_t oldest = 0;  // the oldest entry the stream still holds
};

struct LogOptions {
  std::string name{};  // the stream is "<prefix>.log.<name>"
  std::chrono::milliseconds idle{1000};       // a pause this long ends a page, incomplete
  std::chrono::milliseconds empty_wait{500};  // an empty stream's time to answer "last"
  std::function<void(const Gap&)> on_gap{};     // a read met a trimmed offset
};

// Where a read starts: "first", "last", "next", or an offset.
// A view, as a verb's options are (work_queue.hpp): read() and follow() copy it.
struct From {
  std::string_view position = "first";
  std::optional<std::uint64_t> offset{};  // set: start at this offset (position is ignored)
};

struct Entry {
  std::uint64_t offset = 0;
  client::Message message{};  // owned, already acked
};

struct Page {
  std::vector<Entry> entries{};
  bool complete = false;  // it reached the tip read first
  std::optional<std::uint64_t> tip{};  // the tip read first (nullopt: the stream was empty)
};

struct ReadOptions {
  From from{};
  std::size_t max_entries = 1000;  // a page holds at most this many (then it is incomplete)
};

struct AppendOptions {
  std::string_view body{};
  // The caller's trace context, written into the entry's headers as Publish::trace writes it;
  // none: the entry carries none.
  client::TraceContext trace{};
};

class LogTail;

class Log : public std::enable_shared_from_this<Log> {
 public:
  [[nodiscard]] static Result<std::shared_ptr<Log>> create(std::shared_ptr<Messaging> layer, LogOptions options);
  [[nodiscard]] const std::string& queue() const noexcept { return queue_; }
  [[nodiscard]] client::Driver& driver() const { return layer_->driver(); }  // the loop it runs on

  void declare(client::Callback<void> done);  // idempotent
  void append(std::string_view body, client::Callback<std::uint64_t> offset) { append({.body = body}, std::move(offset)); }
  void append(const AppendOptions& options, client::Callback<std::uint64_t> offset);
  // The highest offset now (nullopt: empty).
  void tip(client::Callback<std::optional<std::uint64_t>> done);
  void read(ReadOptions options, client::Callback<Page> done);
  // Every entry from `from` on, as it is appended, until the tail is closed or its connection
  // ends for good (`on_end`, once). A closed channel (a deleted stream, say) is consumed again
  // with backoff from the entry after the last one handed on; so is a lost connection when
  // the layer runs on a Session. "next" and "last" are resolved against the tip when the tail
  // starts, and "first" against the oldest entry, so an outage before the first entry loses
  // nothing appended meanwhile (and reports what retention took as a gap); entries
  // below a numeric `from` are never handed on. Consumed again, a first entry past the one
  // asked for (trimmed meanwhile) is reported to on_gap and the tail goes on from it.
  void follow(From from, std::function<void(const client::Delivery& d, std::uint64_t offset)> on_entry,
              std::function<void(const Error&)> on_end, client::Callback<std::shared_ptr<LogTail>> done);

 private:
  Log(std::shared_ptr<Messaging> layer, LogOptions options);
  // A gap found: "log.gap" to the layer's observer, then on_gap.
  void report_gap(const Gap& gap) const {
    layer_->observe("log.gap", client::Level::warning,
                    queue_ + ": asked " + std::to_string(gap.asked) + ", oldest retained " + std::to_string(gap.oldest));
    if (options_.on_gap) options_.on_gap(gap);
  }
  void declared(client::Callback<void> then);
  void oldest(client::Callback<std::optional<std::uint64_t>> done);  // the first retained offset
  // The offset of the entry with message_id `id`: read from `start` (below `below`, when set);
  // not there, then from `window` offsets before where that look began, 4 times wider each time.
  // A look that saw nothing, or that a lost channel or connection ended, is made again until
  // `give_up_at` (read_back_patience after the confirm): the entry is there, confirmed.
  void find_entry(std::shared_ptr<std::string> id, wire::FieldValue start, std::optional<std::uint64_t> below,
                  std::uint64_t window, engine::Instant give_up_at, client::Callback<std::uint64_t> done);
  // A From with its own copy of the position: what a read or a tail keeps past the call.
  struct Start {
    std::string position;
    std::optional<std::uint64_t> offset;
  };
  // The tail's subscription, `from` resolved: `fallback` is where to consume again when no
  // entry was handed on yet.
  void subscribe_tail(Start from, std::optional<std::uint64_t> fallback,
                      std::function<void(const client::Delivery& d, std::uint64_t offset)> on_entry,
                      std::function<void(const Error&)> on_end, client::Callback<std::shared_ptr<LogTail>> done);

  std::shared_ptr<Messaging> layer_;
  LogOptions options_;
  std::string queue_;
  bool declared_ = false;
};

// A live tail: a subscription that consumes again after a lost channel (or, on a Session, a
// lost connection) from the entry after the last it handed on.
class LogTail {
 public:
  explicit LogTail(std::shared_ptr<Subscription> s) : subscription_(std::move(s)) {}
  [[nodiscard]] bool active() const noexcept { return !subscription_->over(); }
  [[nodiscard]] bool healthy() const noexcept { return subscription_->healthy(); }
  [[nodiscard]] client::Driver& driver() const { return subscription_->driver(); }  // the loop it runs on
  void close(client::Callback<void> done);

 private:
  std::shared_ptr<Subscription> subscription_;
};

// The broker refused a stream consumer because the stream's member on the node the connection
// reached is not running (a node restarted, members restarting while a leader is elected):
// RabbitMQ 3.10 says so with a channel error (406, "does not have a replica on the local node")
// or by closing the connection (506, "does not have a running local replica"). Transient: the
// member comes back, or a connection to another node reads. Only the broker's text tells it
// from other 406s and 506s.
[[nodiscard]] bool stream_member_unavailable(const Error& e) noexcept;

// The x-stream-offset of a delivery's headers.
[[nodiscard]] std::optional<std::uint64_t> stream_offset(const wire::BasicProperties& properties);
// A trim, as the rule reads: the first entry delivered is past the one asked for, and the one
// asked for is below the oldest retained (offsets are not dense: a jump alone is no proof).
[[nodiscard]] bool is_gap(std::uint64_t asked, std::uint64_t first_delivered, std::uint64_t oldest) noexcept;

}  // namespace warren::messaging
