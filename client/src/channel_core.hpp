// Internal: what a Channel, Consumer or Message handle points at. A ChannelCore is one
// channel of one connection, closed once (with its cause) and never reused, which is how a
// stale handle is told apart from a newer channel that reuses the number. Not installed.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "warren/client/connection.hpp"
#include "warren/client/consumer.hpp"
#include "warren/client/message.hpp"

namespace warren::client::detail {

// The thread the connection's loop runs on, as last seen by the connection. A settle from any
// other thread is posted to the loop.
struct LoopThread {
  std::atomic<std::thread::id> id{};
};

struct ChannelCore {
  ChannelCore(std::weak_ptr<Connection> c, Driver& d, std::shared_ptr<LoopThread> lt, engine::ChannelId channel)
      : connection(std::move(c)), owner(connection.lock().get()), driver(&d), loop(std::move(lt)), id(channel) {}

  std::weak_ptr<Connection> connection;
  Connection* owner;  // valid while `open` (see live_here)
  Driver* driver;  // outlives its connections
  std::shared_ptr<LoopThread> loop;
  engine::ChannelId id;
  std::atomic<bool> open{true};
  // Loop thread only; set once, when it closes. Behind a pointer: an open channel holds 8
  // bytes for it, not an Error's 72 (issue 40: a connection of 2,000 channels).
  std::unique_ptr<const Error> cause;

  [[nodiscard]] bool on_loop() const noexcept { return std::this_thread::get_id() == loop->id.load(std::memory_order_relaxed); }
  // The connection, while this channel is open (loop thread only).
  [[nodiscard]] std::shared_ptr<Connection> live() const {
    if (!open.load(std::memory_order_acquire)) return nullptr;
    return connection.lock();
  }
  // The same without taking a reference (loop thread only), for the callback-free publish:
  // the reference's two atomic operations cost more than the rest of the call's bookkeeping.
  // `open` is enough: a connection closes its cores in its destructor before any member goes,
  // and a callback that drops the connection's last reference inside the publish runs under
  // a reference the publish takes (pump()'s, or observed_publish's when spans or metrics
  // run user code), which the publish does not outlive.
  [[nodiscard]] Connection* live_here() const noexcept {
    return open.load(std::memory_order_acquire) ? owner : nullptr;
  }
  [[nodiscard]] Error gone() const;
  // Settling a delivery of this channel once it is gone: nothing is sent, and says so.
  [[nodiscard]] Error stale(std::uint64_t delivery_tag) const {
    return make_error(errc::channel_closed, "channel " + std::to_string(id) +
                                                " is gone: nothing was sent, the broker redelivers delivery " +
                                                std::to_string(delivery_tag));
  }
  void close(const Error& why) {
    if (!open.load(std::memory_order_relaxed)) return;
    cause = std::make_unique<const Error>(why);
    open.store(false, std::memory_order_release);
  }
};

// Message nodes (each with its buffer), handed back when a Message is destroyed (on any
// thread) and reused by the next delivery, so a stream consumer allocates nothing per message
// in steady state.
class MessagePool {
 public:
  // Room for every node it may keep, so giving one back never allocates.
  explicit MessagePool(std::size_t keep) : keep_(keep) { free_.reserve(keep); }
  MessagePool(const MessagePool&) = delete;
  MessagePool& operator=(const MessagePool&) = delete;
  ~MessagePool() {
    for (auto* d : free_) delete d;
  }
  // A node to fill, or null when none is free.
  [[nodiscard]] MessageData* take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return nullptr;
    auto* d = free_.back();
    free_.pop_back();
    return d;
  }
  void give(MessageData* d) noexcept {
    {
      std::lock_guard lock(mutex_);
      if (free_.size() < keep_) {
        free_.push_back(d);
        return;
      }
    }
    delete d;
  }

 private:
  std::mutex mutex_;
  std::vector<MessageData*> free_;
  std::size_t keep_;
};

// What the stream form (no on_delivery) keeps for receive(): the deliveries not yet read, the
// pool their nodes come from and the receive waiting. A push-mode consumer has none of it.
struct ConsumerBuffer {
  explicit ConsumerBuffer(std::size_t limit_messages);
  std::size_t limit;
  std::vector<Message> ring;  // grows only past the limit (auto-ack overshoot)
  std::size_t head = 0, count = 0;
  std::shared_ptr<MessagePool> pool;
  Callback<Message> waiting;
  bool holding = false;
  bool draining = false;
  // The i-th delivery not yet read (i < count).
  Message& unread(std::size_t i) { return ring[(head + i) % ring.size()]; }
};

class ConsumerCore : public std::enable_shared_from_this<ConsumerCore> {
 public:
  ConsumerCore(std::shared_ptr<ChannelCore> channel, const ConsumeOptions& options,
               std::function<void(const Delivery&)> on_delivery);

  std::shared_ptr<ChannelCore> channel;
  std::string tag;
  const bool manual_ack;
  const bool stream;  // never reject its deliveries
  const bool bounded;  // manual ack under a prefetch: the broker sends no more than the limit
 private:
  // Beside the flags above: after `ended_` it cost 8 bytes of padding.
  bool cancelling_ = false;

 public:
  std::function<void(const Delivery&)> on_delivery;  // push mode; empty: stream mode

  // From the connection (loop thread).
  void deliver(const engine::Message& m);
  void end(const Error* cause);

  void receive(Callback<Message> next);
  void set_on_ended(std::function<void(const Error&)> fn);
  void cancel(Callback<void> done);
  void cancel_quietly();  // the last handle is gone
  [[nodiscard]] bool active() const noexcept { return !ended_ && !cancelling_; }
  [[nodiscard]] std::size_t buffered() const noexcept { return buffer_ ? buffer_->count : 0; }

 private:
  void drain();
  void hand_back();  // reject (requeue) every buffered, unread delivery
  void hold(bool on);  // ask the connection to stop or resume reading
  void clear_buffer() noexcept;  // drop every unread delivery
  Message pop();

  // The stream form only, behind a pointer: a push-mode consumer holds 8 bytes for it, not
  // about 100 (issue 40: a consumer on each of 2,000 channels).
  std::unique_ptr<ConsumerBuffer> buffer_;
  std::function<void(const Error&)> ended_fn_;
  std::unique_ptr<Error> ended_;  // behind a pointer, as ChannelCore::cause
};

}  // namespace warren::client::detail
