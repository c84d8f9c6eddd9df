// A publisher and a consumer on one Session, for the fault and cluster tests: message i
// carries "i" as its body, is persistent, and is acked by the consumer when it arrives. It
// keeps account of what was confirmed, what ended with an unknown outcome, and what arrived.
#pragma once

#include <algorithm>
#include <map>
#include <set>

#include "integration/client_fixture.hpp"
#include "warren/client/session.hpp"

namespace warren::test {

using Clock = std::chrono::steady_clock;

class Traffic {
 public:
  Traffic(Loop& loop, std::shared_ptr<client::Session> session, std::string queue, bool durable,
          wire::FieldTable arguments = {})
      : loop_(loop), session_(std::move(session)), queue_(std::move(queue)), arguments_(std::move(arguments)) {
    channel_ = session_->channel([this, durable](client::RecoveringChannel& c, client::Callback<void> done) {
      ++setups;
      c.channel().queue_declare({.name = queue_, .durable = durable, .arguments = arguments_},
                                [this, &c, done](Result<client::QueueDeclared> q) {
                                  if (!q) return done(q.error());
                                  c.channel().consume({.queue = queue_, .prefetch = 100},
                                                      [this](const client::Delivery& m) {
                                                        received.insert(std::stoi(std::string(m.body_text())));
                                                        ++deliveries;
                                                        (void)m.ack();  // a stale one is refused: it comes again
                                                      },
                                                      [this, done](Result<client::Consumer> r) {
                                                        if (!r) return done(r.error());
                                                        consumers_.push_back(std::move(*r));
                                                        done(Result<void>());
                                                      });
                                });
    });
  }

  // Keeps `window` publishes in flight until `total` are settled.
  void publish(int total, int window) {
    total_ = total;
    window_ = window;
    more();
  }
  void more() {
    while (next_ < total_ && next_ - settled() < window_) {
      const int id = next_++;
      auto body = std::make_shared<std::string>(std::to_string(id));
      channel_->publish({.routing_key = queue_, .properties = {.delivery_mode = client::persistent}, .timeout = 30s},
                        std::as_bytes(std::span{body->data(), body->size()}),
                        [this, id, body](Result<engine::PublishOutcome> o) {
                          if (o.ok() && *o == engine::PublishOutcome::confirmed) confirmed.insert(id);
                          else unknown.insert(id);
                          ++outcomes[id];
                          loop_post_more_ = true;
                        });
    }
  }
  // Runs the loop, topping up the window, until `done` or the limit.
  bool run_until(const std::function<bool()>& done, std::chrono::seconds limit) {
    return loop_.run_until([&] {
      if (loop_post_more_) {
        loop_post_more_ = false;
        more();
      }
      return done();
    }, limit);
  }
  [[nodiscard]] int settled() const { return static_cast<int>(confirmed.size() + unknown.size()); }
  [[nodiscard]] bool all_settled() const { return settled() == total_; }
  [[nodiscard]] bool all_confirmed_consumed() const {
    return std::includes(received.begin(), received.end(), confirmed.begin(), confirmed.end());
  }
  [[nodiscard]] int sent() const { return next_; }
  // The port of the node the channel is connected to now (0 when it is not).
  [[nodiscard]] std::uint16_t connected_port() const {
    auto at = session_->endpoint();
    return channel_->ready() && at ? at->port : 0;
  }

  int setups = 0;
  std::set<int> confirmed, unknown, received;
  std::map<int, int> outcomes;
  long deliveries = 0;

 private:
  Loop& loop_;
  std::shared_ptr<client::Session> session_;
  std::string queue_;
  wire::FieldTable arguments_;
  std::shared_ptr<client::RecoveringChannel> channel_;
  std::vector<client::Consumer> consumers_;  // one per setup; an older one's channel is gone
  int total_ = 0, window_ = 0, next_ = 0;
  bool loop_post_more_ = false;
};

}  // namespace warren::test
