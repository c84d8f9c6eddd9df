#include "warren/messaging/direct.hpp"

#include "warren/client/kept.hpp"

namespace warren::messaging {
namespace {

Result<void> check_address(std::string_view address) {
  if (address.empty() || address.size() > 200)
    return make_error(errc::invalid_argument, "an address is 1 to 200 bytes");
  return {};
}

// Declares `queue` and binds it under `address` on the direct exchange, on `ch`.
void declare_and_bind(const std::shared_ptr<Messaging>& layer, const client::Channel& ch,
                      client::Kept<client::QueueDeclareOptions> queue, std::string address, client::Callback<void> done) {
  std::string exchange = layer->direct_exchange();
  // A consumer channel may be the first to touch the broker: the exchange must exist to bind.
  ch.exchange_declare({.name = exchange, .type = "direct", .durable = true},
                      [ch, queue, exchange, address, done](Result<void> r) {
                        if (!r) return done(r);
                        ch.queue_declare(*queue, [ch, exchange, address, done](Result<client::QueueDeclared> q) {
                          if (!q) return done(q.error());
                          ch.queue_bind({.queue = q->name, .exchange = exchange, .routing_key = address}, done);
                        });
                      });
}

// The layer settles what the callback left with the view (message.hpp: whoever holds the
// settle settles it): not what the callback settled itself or took.
void settle_after(const OnDirect& on_message, const client::Delivery& d) {
  on_message(d);
  if (d.settles()) (void)d.ack();  // fails only if the channel is gone: the broker redelivers then
}

}  // namespace

void open_inbox(const std::shared_ptr<Messaging>& layer, InboxOptions options, OnDirect on_message,
                client::Callback<std::shared_ptr<Inbox>> done) {
  if (options.prefetch == 0) return done(make_error(errc::invalid_argument, "prefetch must be at least 1"));
  // A fresh name per inbox: a fixed-name exclusive queue redeclared right after a network
  // blip can meet 405 until the broker reaps the old connection.
  std::string address = layer->name("inbox." + layer->make_uuid());
  std::weak_ptr<Messaging> weak = layer;
  auto holder = std::make_shared<std::shared_ptr<Subscription>>();
  *holder = Subscription::start(
      layer,
      {.queue = address,
       .prefetch = options.prefetch,
       .setup = [weak, address](const client::Channel& ch, client::Callback<void> d) {
         auto layer = weak.lock();
         if (!layer) return d(make_error(errc::invalid_argument, "the messaging layer is gone"));
         declare_and_bind(layer, ch, client::QueueDeclareOptions{.name = address, .exclusive = true}, address, std::move(d));
       },
       .on_delivery = [on_message](const client::Delivery& d) { settle_after(on_message, d); }},
      [holder, address, done](Result<void> r) {
        auto s = std::move(*holder);
        if (!r) return done(r.error());
        done(std::make_shared<Inbox>(address, std::move(s)));
      });
}

void join_group(const std::shared_ptr<Messaging>& layer, GroupOptions options, OnDirect on_message,
                client::Callback<std::shared_ptr<Subscription>> done) {
  if (auto ok = check_address(options.address); !ok) return done(ok.error());
  if (options.prefetch == 0) return done(make_error(errc::invalid_argument, "prefetch must be at least 1"));
  std::string queue = layer->name("group." + std::string(options.address));
  // Durable (a transient shared queue is refused on RabbitMQ 4.3) and expiring once unused.
  // Kept: the subscription's setup declares it again on every recovery.
  const client::Kept<client::QueueDeclareOptions> declare = client::QueueDeclareOptions{
      .name = queue,
      .durable = true,
      .arguments = {{"x-queue-type", "classic"}, {"x-expires", static_cast<std::int64_t>(layer->options().inbox_ttl.count())}}};
  std::weak_ptr<Messaging> weak = layer;
  auto holder = std::make_shared<std::shared_ptr<Subscription>>();
  *holder = Subscription::start(
      layer,
      {.queue = queue,
       .prefetch = options.prefetch,
       .setup = [weak, declare, address = std::string(options.address)](const client::Channel& ch, client::Callback<void> d) {
         auto layer = weak.lock();
         if (!layer) return d(make_error(errc::invalid_argument, "the messaging layer is gone"));
         declare_and_bind(layer, ch, declare, address, std::move(d));
       },
       .on_delivery = [on_message](const client::Delivery& d) { settle_after(on_message, d); }},
      [holder, done](Result<void> r) {
        auto s = std::move(*holder);
        if (!r) return done(r.error());
        done(std::move(s));
      });
}

void send(const std::shared_ptr<Messaging>& layer, const SendOptions& options, client::Callback<void> done) {
  if (auto ok = check_address(options.address); !ok) return done(ok.error());
  struct Owned {
    std::string address, body, reply_to, correlation_id;
    client::FieldTable headers;
    std::optional<engine::Duration> timeout;
  };
  auto o = std::make_shared<Owned>(Owned{std::string(options.address), std::string(options.body),
                                         std::string(options.reply_to), std::string(options.correlation_id),
                                         options.headers.to_table(), options.timeout});
  std::weak_ptr<Messaging> weak = layer;
  layer->control_channel([weak, o, done](Result<client::Channel> ch) {
    auto layer = weak.lock();
    if (!layer) return done(make_error(errc::invalid_argument, "the messaging layer is gone"));
    if (!ch) return done(ch.error());
    client::Properties p;
    if (!o->headers.empty()) p.headers = wire::TableRef(o->headers);
    p.delivery_mode = client::persistent;
    if (!o->reply_to.empty()) p.reply_to = o->reply_to;
    if (!o->correlation_id.empty()) p.correlation_id = o->correlation_id;
    const std::string exchange = layer->direct_exchange();
    ch->publish({.exchange = exchange, .routing_key = o->address, .mandatory = true, .properties = p, .timeout = o->timeout},
                client::as_bytes(o->body), [done](Result<engine::PublishOutcome> r) {
                  if (!r) return done(r.error());  // errc::unroutable: nobody listens on the address
                  done(Result<void>());
                });
  });
}

}  // namespace warren::messaging
