// The one receive a stream consumer has in flight, kept in a slot that every receive reuses,
// so reading a stream costs no heap allocation per message: the handler is stored in place,
// and the client::Callback handed to the consumer holds a bare pointer (small enough for
// std::function's inline storage). While a receive waits the slot keeps itself alive; the
// client answers every receive once (a message, or the subscription's end).
// Loop thread only. May not: complete a handler inline (it is posted, as initiate.hpp does).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "warren/asio/initiate.hpp"
#include "warren/client/message.hpp"

namespace warren::asio_driver::detail {

class ReceiveSlot : public std::enable_shared_from_this<ReceiveSlot> {
 public:
  ReceiveSlot() = default;
  ReceiveSlot(const ReceiveSlot&) = delete;
  ReceiveSlot& operator=(const ReceiveSlot&) = delete;
  ~ReceiveSlot() { drop(std::exchange(held_, nullptr)); }

  [[nodiscard]] bool busy() const noexcept { return held_ != nullptr; }

  // Keeps `handler` until the client answers; the returned callback answers it. One at a time.
  template <class Handler>
  [[nodiscard]] client::Callback<client::Message> start(Handler handler, const LoopExecutor& loop) {
    using Kept = KeptHandler<Handler>;
    if constexpr (fits<Kept>) {
      held_ = new (storage_) Kept(std::move(handler), loop);
    } else {
      held_ = new Kept(std::move(handler), loop);  // a handler too large to keep in place
    }
    self_ = shared_from_this();
    return [slot = this](Result<client::Message> result) { slot->finish(std::move(result)); };
  }

 private:
  struct Held {
    virtual ~Held() = default;
    virtual void complete(Result<client::Message>&& result) = 0;
    [[nodiscard]] virtual bool in_place() const noexcept = 0;
  };
  template <class Handler>
  struct KeptHandler final : Held {
    KeptHandler(Handler h, const LoopExecutor& loop) : completion(std::move(h), loop) {}
    void complete(Result<client::Message>&& result) override { completion(std::move(result)); }
    [[nodiscard]] bool in_place() const noexcept override { return fits<KeptHandler>; }
    Completion<client::Message, Handler> completion;
  };

  void finish(Result<client::Message> result) {
    auto keep = std::move(self_);
    Held* held = std::exchange(held_, nullptr);
    if (!held) return;
    held->complete(std::move(result));  // posts the handler; nothing of it stays behind
    drop(held);
  }

  static void drop(Held* held) noexcept {
    if (!held) return;
    if (held->in_place()) held->~Held();
    else delete held;
  }

  static constexpr std::size_t room = 128;
  template <class Kept>
  static constexpr bool fits = sizeof(Kept) <= room && alignof(Kept) <= alignof(std::max_align_t);

  // Room for the handlers of use_awaitable, use_future and a plain lambda, with their work guard.
  alignas(std::max_align_t) std::byte storage_[room];
  Held* held_ = nullptr;
  std::shared_ptr<ReceiveSlot> self_;  // set while a receive waits
};

}  // namespace warren::asio_driver::detail
