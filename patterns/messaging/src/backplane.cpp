#include "warren/messaging/backplane.hpp"

#include <vector>

namespace warren::messaging {
namespace {

Result<void> check_room(std::string_view room) {
  if (room.empty() || room.size() > 200) return make_error(errc::invalid_argument, "a room is 1 to 200 bytes");
  return {};
}

// Binds `queue` under each room in turn.
void bind_all(client::Channel ch, std::string queue, std::string exchange, std::shared_ptr<std::vector<std::string>> rooms,
              std::size_t i, client::Callback<void> done) {
  if (i == rooms->size()) return done(Result<void>());
  ch.queue_bind({.queue = queue, .exchange = exchange, .routing_key = (*rooms)[i]},
                [ch, queue, exchange, rooms, i, done](Result<void> r) {
                  if (!r) return done(r);
                  bind_all(ch, queue, exchange, rooms, i + 1, done);
                });
}

}  // namespace

void Backplane::start(const std::shared_ptr<Messaging>& layer, BackplaneOptions options, OnRoomEvent on_event,
                      client::Callback<std::shared_ptr<Backplane>> done) {
  if (options.prefetch == 0) return done(make_error(errc::invalid_argument, "prefetch must be at least 1"));
  std::shared_ptr<Backplane> bp(new Backplane(layer, layer->name("bp." + layer->make_uuid())));
  std::weak_ptr<Backplane> weak = bp;
  bp->subscription_ = Subscription::start(
      layer,
      {.queue = bp->queue_,
       .prefetch = options.prefetch,
       .setup = [weak](const client::Channel& ch, client::Callback<void> d) {
         auto self = weak.lock();
         if (!self) return d(make_error(errc::invalid_argument, "the backplane is gone"));
         const std::string exchange = self->layer_->backplane_exchange();
         auto rooms = std::make_shared<std::vector<std::string>>(self->rooms_.begin(), self->rooms_.end());
         ch.exchange_declare({.name = exchange, .type = "direct", .durable = true},
                             [ch, queue = self->queue_, exchange, rooms, d](Result<void> r) {
                               if (!r) return d(r);
                               // Exclusive: it goes with this connection, and no other may read it.
                               ch.queue_declare({.name = queue, .exclusive = true, .auto_delete = true},
                                                [ch, queue, exchange, rooms, d](Result<client::QueueDeclared> q) {
                                                  if (!q) return d(q.error());
                                                  bind_all(ch, queue, exchange, rooms, 0, d);
                                                });
                             });
       },
       .on_delivery = [on_event](const client::Delivery& d) {
         on_event(d.routing_key(), d);
         if (d.settles()) (void)d.ack();  // not what the callback settled or took
       }},
      [bp, done](Result<void> r) {
        if (!r) return done(r.error());
        done(bp);
      });
}

void Backplane::join(std::string room, client::Callback<void> done) {
  if (auto ok = check_room(room); !ok) return done(ok.error());
  auto self = shared_from_this();
  layer_->control_channel([self, room, done](Result<client::Channel> ch) {
    if (!ch) return done(ch.error());
    ch->queue_bind({.queue = self->queue_, .exchange = self->layer_->backplane_exchange(), .routing_key = room},
                   [self, room, done](Result<void> r) {
                     if (r) self->rooms_.insert(room);
                     done(r);
                   });
  });
}

void Backplane::leave(std::string room, client::Callback<void> done) {
  auto self = shared_from_this();
  layer_->control_channel([self, room, done](Result<client::Channel> ch) {
    if (!ch) return done(ch.error());
    self->rooms_.erase(room);
    ch->queue_unbind({.queue = self->queue_, .exchange = self->layer_->backplane_exchange(), .routing_key = room}, done);
  });
}

void Backplane::publish(std::string_view room_view, std::string_view body_view, client::Callback<void> done) {
  if (auto ok = check_room(room_view); !ok) return done(ok.error());
  auto room = std::make_shared<std::string>(room_view);
  auto body = std::make_shared<std::string>(body_view);
  auto self = shared_from_this();
  layer_->control_channel([self, room, body, done](Result<client::Channel> ch) {
    if (!ch) return done(ch.error());
    const std::string exchange = self->layer_->backplane_exchange();
    ch->publish({.exchange = exchange, .routing_key = *room}, client::as_bytes(*body),
                [done](Result<engine::PublishOutcome> r) {
                  if (!r) return done(r.error());
                  done(Result<void>());
                });
  });
}

void Backplane::close(client::Callback<void> done) { subscription_->cancel(std::move(done)); }

}  // namespace warren::messaging
