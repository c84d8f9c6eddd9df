#include "warren/messaging/log.hpp"

#include <algorithm>
#include <variant>

#include "held_trace.hpp"
#include "names.hpp"

namespace warren::messaging {
namespace {

// One bounded read of a stream on a channel of its own: every delivery is acked and handed to
// `on_entry` until it says stop, or no delivery comes for a while; then the channel is closed
// (a stream delivery is never rejected: 3.10-3.12 answer that with 540 on the connection).
// With `settle`, it also ends that long after its first delivery, however busy the stream is:
// a look at the last chunk (the tip, an append's read-back) must not wait for a silence that
// appenders never leave.
// A look at the last chunk (the tip, an append's read-back) waits at most this long in
// silence, and reads at most this long after its first delivery: the chunk arrives at once,
// and what comes later was appended after the look began.
constexpr std::chrono::milliseconds last_chunk_look{200};
// How long a confirmed append waits for the stream to show its entry (a stream that delivers
// nothing while a leader is elected or a member hangs), looking again every first wait (5 s).
constexpr std::chrono::seconds read_back_patience{60};
// The pause before a look that failed is made again: a refusal (a member not running on this
// node) comes back at once, and must not be asked again in a loop.
constexpr std::chrono::milliseconds look_again_pause{500};

// `fn` once, `pause` from now, on the layer's loop; the timer holds itself until it fires.
void after(Messaging& layer, std::chrono::milliseconds pause, std::function<void()> fn) {
  auto holder = std::make_shared<std::unique_ptr<client::Timer>>();
  auto& driver = layer.driver();
  *holder = driver.timer([holder, fn = std::move(fn), &driver]() mutable {
    auto run = std::move(fn);
    driver.post([holder] { holder->reset(); });  // not inside its own call
    run();
  });
  (*holder)->arm(driver.now() + pause);
}

// A look that ended without an answer the stream gave: worth making again.
bool transient(const Error& e) {
  return stream_member_unavailable(e) || e.connection_ended || e.code == make_error_code(errc::timeout) || e.code == make_error_code(errc::channel_closed) ||
         e.code == make_error_code(errc::connection_closed) || e.code == make_error_code(errc::connection_lost);
}

class Reader : public std::enable_shared_from_this<Reader> {
 public:
  using OnEntry = std::function<bool(const client::Delivery& d, std::uint64_t offset)>;  // true: stop
  Reader(std::shared_ptr<Messaging> layer, std::string queue, wire::FieldValue start, std::chrono::milliseconds first_wait,
         std::chrono::milliseconds idle, OnEntry on_entry, client::Callback<bool> done,
         std::optional<std::chrono::milliseconds> settle = std::nullopt)
      : layer_(std::move(layer)), queue_(std::move(queue)), start_(std::move(start)), first_wait_(first_wait),
        idle_(idle), settle_(settle), on_entry_(std::move(on_entry)), done_(std::move(done)) {}

  void start() {
    auto self = shared_from_this();
    layer_->consumer_channel([self](Result<client::Channel> ch) {
      if (!ch) return self->finish(ch.error());
      self->ch_ = *ch;
      // Silence counts only once the broker took the consumer: a consume it never answers (a
      // member that hangs) is the request's timeout, not an empty stream.
      self->timer_ = self->layer_->driver().timer([self] { self->finish(false); });
      client::ConsumeOptions options{.queue = self->queue_, .prefetch = 200, .arguments = {{"x-stream-offset", self->start_}}, .stream = true};
      // What the consumer keeps (its delivery and end callbacks) holds the reader weakly: the
      // reader holds the consumer, and the timer keeps the reader alive until it finishes.
      std::weak_ptr<Reader> weak = self;
      ch->consume(
          options,
          [weak](const client::Delivery& d) {
            if (auto self = weak.lock()) self->delivered(d);
          },
          [self, weak](Result<client::Consumer> c) {
            if (!c) return self->finish(c.error());
            if (!self->finished_) self->timer_->arm(self->layer_->driver().now() + self->first_wait_);
            self->consumer_ = std::move(*c);
            self->consumer_.on_ended([weak](const Error& cause) {
              if (auto self = weak.lock()) self->finish(cause);
            });
          });
    });
  }

 private:
  void delivered(const client::Delivery& d) {
    if (finished_) return;
    auto offset = stream_offset(d.properties());
    if (auto r = d.ack(); !r) return finish(r.error());
    if (!offset) return finish(make_error(errc::protocol_error, "a stream delivery without x-stream-offset"));
    if (on_entry_(d, *offset)) return finish(true);
    const auto now = layer_->driver().now();
    if (settle_ && !settle_at_) settle_at_ = now + *settle_;
    timer_->arm(settle_at_ ? std::min(now + idle_, *settle_at_) : now + idle_);
  }

  void finish(Result<bool> r) {
    if (finished_) return;
    finished_ = true;
    if (timer_) timer_->cancel();
    auto done = std::move(done_);
    auto self = shared_from_this();
    // The timer's callback holds this reader: drop it after this turn, not inside its own call.
    layer_->driver().post([self] { self->timer_.reset(); });
    if (!ch_.is_open()) return done(r);
    ch_.close([done, r](Result<void>) { done(r); });
  }

  std::shared_ptr<Messaging> layer_;
  std::string queue_;
  wire::FieldValue start_;
  std::chrono::milliseconds first_wait_, idle_;
  std::optional<std::chrono::milliseconds> settle_;
  std::optional<engine::Instant> settle_at_;  // the first delivery's time + settle
  OnEntry on_entry_;
  client::Callback<bool> done_;
  client::Channel ch_;
  client::Consumer consumer_;
  std::unique_ptr<client::Timer> timer_;
  bool finished_ = false;
};

wire::FieldValue start_of(std::optional<std::uint64_t> offset, std::string_view position) {
  if (offset) return static_cast<std::int64_t>(*offset);
  return std::string(position);
}

}  // namespace

bool stream_member_unavailable(const Error& e) noexcept {
  return (e.reply_code == 406 || e.reply_code == 506) && e.detail.find("replica") != std::string::npos;
}

std::optional<std::uint64_t> stream_offset(const wire::BasicProperties& properties) {
  if (!properties.headers) return std::nullopt;
  auto table = properties.headers->to_table();
  if (!table) return std::nullopt;
  const auto* v = table->find("x-stream-offset");
  const auto n = v ? v->integer() : std::nullopt;
  if (!n || *n < 0) return std::nullopt;
  return static_cast<std::uint64_t>(*n);
}

bool is_gap(std::uint64_t asked, std::uint64_t first_delivered, std::uint64_t oldest) noexcept {
  return first_delivered > asked && asked < oldest;
}

Result<std::shared_ptr<Log>> Log::create(std::shared_ptr<Messaging> layer, LogOptions options) {
  if (!layer) return make_error(errc::invalid_argument, "no messaging layer");
  if (!detail::valid_name(options.name, 180))
    return make_error(errc::invalid_argument, "log name '" + options.name + "': letters, digits, '.', '-', '_', ':'");
  if (options.idle.count() <= 0 || options.empty_wait.count() <= 0)
    return make_error(errc::invalid_argument, "idle and empty_wait must be positive");
  return std::shared_ptr<Log>(new Log(std::move(layer), std::move(options)));
}

Log::Log(std::shared_ptr<Messaging> layer, LogOptions options)
    : layer_(std::move(layer)), options_(std::move(options)), queue_(layer_->name("log." + options_.name)) {}

void Log::declare(client::Callback<void> done) {
  std::weak_ptr<Log> weak = weak_from_this();
  layer_->control_channel([weak, done](Result<client::Channel> ch) {
    auto self = weak.lock();
    if (!self) return done(make_error(errc::invalid_argument, "the log is gone"));
    if (!ch) return done(ch.error());
    client::QueueDeclareOptions q{.name = self->queue_, .durable = true, .arguments = {{"x-queue-type", "stream"}}};
    // Never x-max-length-bytes: 0 for "no limit": leave it out.
    if (auto max = self->layer_->options().stream_max_bytes; max > 0)
      q.arguments = {{"x-queue-type", "stream"}, {"x-max-length-bytes", static_cast<std::int64_t>(max)}};
    const std::string exchange = self->layer_->direct_exchange();
    ch->queue_declare(q, [weak, ch = *ch, exchange, done](Result<client::QueueDeclared> r) {
      if (!r) return done(r.error());
      // Appends go through "<prefix>.direct" (no default exchange: the prefix's names suffice).
      ch.queue_bind({.queue = r->name, .exchange = exchange, .routing_key = r->name}, [weak, done](Result<void> b) {
        if (auto self = weak.lock(); self && b) self->declared_ = true;
        done(b);
      });
    });
  });
}

void Log::declared(client::Callback<void> then) {
  if (declared_) return layer_->driver().post([then] { then(Result<void>()); });
  declare(std::move(then));
}

void Log::append(const AppendOptions& options, client::Callback<std::uint64_t> done) {
  auto body = std::make_shared<std::string>(options.body);
  auto trace = detail::hold(options.trace);
  auto self = shared_from_this();
  declared([self, body, trace, done](Result<void> r) {
    if (!r) return done(r.error());
    auto id = std::make_shared<std::string>(self->layer_->make_uuid());
    self->layer_->control_channel([self, body, trace, id, done](Result<client::Channel> ch) {
      if (!ch) return done(ch.error());
      const std::string exchange = self->layer_->direct_exchange();
      ch->publish({.exchange = exchange,
                   .routing_key = self->queue_,
                   .mandatory = true,
                   .properties = {.delivery_mode = client::persistent, .message_id = *id},
                   .trace = trace->context},
                  client::as_bytes(*body), [self, id, done](Result<engine::PublishOutcome> sent) {
                    if (!sent) return done(sent.error());
                    // The extra round trip: read the last chunk back and find this entry in it.
                    self->find_entry(id, wire::FieldValue("last"), std::nullopt, 64,
                                     self->layer_->driver().now() + read_back_patience, done);
                  });
    });
  });
}

void Log::find_entry(std::shared_ptr<std::string> id, wire::FieldValue start, std::optional<std::uint64_t> below,
                     std::uint64_t window, engine::Instant give_up_at, client::Callback<std::uint64_t> done) {
  auto found = std::make_shared<std::optional<std::uint64_t>>();
  auto lowest = std::make_shared<std::optional<std::uint64_t>>();
  auto self = shared_from_this();
  // The entry was confirmed, so the stream has it: the first delivery is only waited for
  // longer than `idle` on a slow broker, and the look ends as soon as the entry is seen.
  const auto first_wait = std::max(options_.idle, std::chrono::milliseconds(5000));
  const auto look = std::min(options_.idle, last_chunk_look);
  auto reader = std::make_shared<Reader>(
      layer_, queue_, start, first_wait, look,
      [id, found, lowest, below](const client::Delivery& d, std::uint64_t offset) {
        if (below && offset >= *below) return true;  // back where the previous look began
        if (!*lowest || offset < **lowest) *lowest = offset;
        if (d.properties().message_id == std::string_view(*id)) *found = offset;
        return found->has_value();
      },
      [self, id, found, lowest, below, start, window, give_up_at, done](Result<bool> r) {
        const bool patient = self->layer_->driver().now() < give_up_at;
        if (!r) {
          // Its channel or connection went: again, on a new channel (a Session's next connection).
          if (patient && transient(r.error()) && (self->layer_->recovers() || self->layer_->connection_open()))
            return after(*self->layer_, look_again_pause,
                         [self, id, start, below, window, give_up_at, done] { self->find_entry(id, start, below, window, give_up_at, done); });
          return done(r.error());
        }
        if (*found) return done(**found);
        // Confirmed before this look began, so it lies before everything this look saw: another
        // appender's chunk came after it. Look further back, a wider window each time.
        const auto* from = std::get_if<std::int64_t>(&start.value);
        const std::optional<std::uint64_t> looked_from =
            from ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(*from)) : std::optional<std::uint64_t>();
        const std::optional<std::uint64_t> edge = looked_from ? looked_from : *lowest;
        if (!edge) {  // the stream delivered nothing within the first wait: look again, the entry is there
          if (patient) return self->find_entry(id, start, below, window, give_up_at, done);
          return done(make_error(errc::timeout, "appended, but the stream showed no entry within " +
                                                    std::to_string(read_back_patience.count()) + " s"));
        }
        if (*edge == 0)  // back at the stream's start
          return done(make_error(errc::not_found, "appended, but its entry was not found reading back from the tip"));
        const std::uint64_t back = std::min<std::uint64_t>(*edge, window);
        self->find_entry(id, wire::FieldValue(static_cast<std::int64_t>(*edge - back)), edge, window * 4, give_up_at, done);
      },
      // The look at the last chunk ends its idle after its first entry even while others
      // append; a look further back ends where the previous one began (`below`).
      below ? std::nullopt : std::optional(look));
  reader->start();
}

void Log::tip(client::Callback<std::optional<std::uint64_t>> done) {
  auto highest = std::make_shared<std::optional<std::uint64_t>>();
  const auto look = std::min(options_.idle, last_chunk_look);
  auto reader = std::make_shared<Reader>(
      layer_, queue_, wire::FieldValue("last"), options_.empty_wait, look,
      [highest](const client::Delivery&, std::uint64_t offset) {
        *highest = std::max(offset, highest->value_or(0));
        return false;
      },
      [highest, done](Result<bool> r) {
        if (!r) return done(r.error());
        done(*highest);
      },
      // The last chunk arrives at once; what comes after the settle was appended after the look
      // began, and under steady appends a silence never comes.
      look);
  reader->start();
}

void Log::read(ReadOptions options, client::Callback<Page> done) {
  auto self = shared_from_this();
  tip([self, from = Start{std::string(options.from.position), options.from.offset}, max_entries = options.max_entries,
       done](Result<std::optional<std::uint64_t>> tip) {
    if (!tip) return done(tip.error());
    auto page = std::make_shared<Page>();
    page->tip = *tip;
    // Nothing to catch up on: an empty stream, "next", or a start past the tip.
    if (!*tip || (!from.offset && from.position == "next") || (from.offset && *from.offset > **tip)) {
      page->complete = true;
      return done(std::move(*page));
    }
    const std::uint64_t until = **tip;
    auto first = std::make_shared<std::optional<std::uint64_t>>();
    auto reader = std::make_shared<Reader>(
        self->layer_, self->queue_, start_of(from.offset, from.position), self->options_.idle, self->options_.idle,
        [page, first, until, max = max_entries](const client::Delivery& d, std::uint64_t offset) {
          if (!*first) *first = offset;
          if (offset > until) {  // past the tip read first: the page is done without it
            page->complete = true;
            return true;
          }
          page->entries.push_back({.offset = offset, .message = d.take()});
          if (offset == until) page->complete = true;
          return page->complete || page->entries.size() >= max;
        },
        [self, page, first, from, done](Result<bool> r) {
          if (!r) return done(r.error());
          if (!from.offset || !*first || **first <= *from.offset) return done(std::move(*page));
          // The first entry is past the one asked for: trimmed, or offsets that are not dense?
          self->oldest([self, page, asked = *from.offset, first = **first, done](Result<std::optional<std::uint64_t>> o) {
            if (!o) return done(o.error());
            if (*o && is_gap(asked, first, **o)) {
              Gap gap{.asked = asked, .oldest = **o};
              self->report_gap(gap);
              Error e = make_error(errc::not_found, "offset " + std::to_string(asked) + " is gone; the oldest retained is " +
                                                        std::to_string(gap.oldest));
              e.reply_code = 410;
              return done(e);
            }
            done(std::move(*page));
          });
        });
    reader->start();
  });
}

void Log::oldest(client::Callback<std::optional<std::uint64_t>> done) {
  auto first = std::make_shared<std::optional<std::uint64_t>>();
  auto reader = std::make_shared<Reader>(
      layer_, queue_, wire::FieldValue("first"), options_.empty_wait, options_.idle,
      [first](const client::Delivery&, std::uint64_t offset) {
        *first = offset;
        return true;
      },
      [first, done](Result<bool> r) {
        if (!r) return done(r.error());
        done(*first);
      });
  reader->start();
}

void Log::follow(From given, std::function<void(const client::Delivery& d, std::uint64_t offset)> on_entry,
                 std::function<void(const Error&)> on_end, client::Callback<std::shared_ptr<LogTail>> done) {
  Start from{std::string(given.position), given.offset};
  // "first", "next" and "last" name places that move (retention, appends): each is resolved
  // once, now ("first" against the oldest entry, "next" and "last" against the tip), so
  // consuming again before the first entry (a reconnect) starts where the tail started, not
  // where the stream has got to meanwhile, and what retention took meanwhile is a reported
  // gap. An empty stream starts at 0 (RabbitMQ never empties a stream that had entries: it
  // keeps the segment being written).
  const bool moves = from.position == "first" || from.position == "next" || from.position == "last";
  if (from.offset || !moves) return subscribe_tail(from, from.offset, on_entry, on_end, done);
  auto resolve = [self = shared_from_this(), from, on_entry, on_end, done](Result<std::optional<std::uint64_t>> found) {
    if (!found) return done(found.error());
    const std::uint64_t resolved = from.position == "next" ? (*found ? **found + 1 : 0) : found->value_or(0);
    // "last" keeps its first look at the whole last chunk, and falls back to the tip entry
    // only to consume again; "first" and "next" are offsets from the start.
    if (from.position == "last") return self->subscribe_tail(from, resolved, on_entry, on_end, done);
    self->subscribe_tail(Start{.position = {}, .offset = resolved}, resolved, on_entry, on_end, done);
  };
  if (from.position == "first") return oldest(std::move(resolve));
  tip(std::move(resolve));
}

void Log::subscribe_tail(Start from, std::optional<std::uint64_t> fallback,
                         std::function<void(const client::Delivery& d, std::uint64_t offset)> on_entry,
                         std::function<void(const Error&)> on_end, client::Callback<std::shared_ptr<LogTail>> done) {
  // Where the next consume starts: after the last entry handed on, else `fallback` (where the
  // tail started, resolved), else the position as given ("first" names no moving place).
  // Entries below it are not handed on (a stream starts at the chunk holding the offset).
  struct Place {
    std::optional<std::uint64_t> next;
    std::optional<std::uint64_t> asked;  // what the current consume asked for, numerically
    bool first_of_consume = true;
  };
  auto place = std::make_shared<Place>(Place{.next = from.offset});
  auto holder = std::make_shared<std::shared_ptr<Subscription>>();
  std::weak_ptr<Log> weak = weak_from_this();
  *holder = Subscription::start(
      layer_,
      {.queue = queue_,
       .prefetch = 200,
       .setup = [](const client::Channel&, client::Callback<void> d) { d(Result<void>()); },  // a stream is durable
       .on_delivery = [place, on_entry, weak](const client::Delivery& d) {
         auto offset = stream_offset(d.properties());
         (void)d.ack();
         if (!offset) return;
         const bool first = std::exchange(place->first_of_consume, false);
         // Consumed again from an offset and the first entry is past it: what lay between is
         // gone (trimmed while the tail was away). Skipped, and said so.
         if (first && place->asked && *offset > *place->asked)
           if (auto self = weak.lock()) self->report_gap(Gap{.asked = *place->asked, .oldest = *offset});
         if (place->next && *offset < *place->next) return;
         place->next = *offset + 1;
         on_entry(d, *offset);
       },
       .arguments = [place, from, fallback]() -> client::FieldTable {
         place->first_of_consume = true;
         place->asked = place->next ? place->next : fallback;
         if (place->asked) return {{"x-stream-offset", static_cast<std::int64_t>(*place->asked)}};
         return {{"x-stream-offset", start_of(from.offset, from.position)}};
       },
       .stream = true,
       .on_over = [on_end](const Error& cause) {
         if (on_end) on_end(cause);
       }},
      [holder, done](Result<void> r) {
        auto s = std::move(*holder);
        if (!r) return done(r.error());
        done(std::make_shared<LogTail>(std::move(s)));
      });
}

void LogTail::close(client::Callback<void> done) { subscription_->cancel(std::move(done)); }

}  // namespace warren::messaging
