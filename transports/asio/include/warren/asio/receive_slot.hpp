// The one receive a stream consumer has in flight, kept in a slot that every receive reuses,
// so reading a stream costs no heap allocation per message, and little time:
// - the handler is stored in place, and the client::Callback handed to the consumer holds a
//   bare pointer (small enough for std::function's inline storage);
// - a handler whose executor is the connection's own io_context is posted straight to it,
//   with an allocator lending the slot's own operation block (operation_block.hpp). Any other
//   handler is posted as initiate.hpp does, through Asio's own recycling;
// - while such a posted handler runs, a receive it starts that finds a message buffered is
//   answered when the handler has returned, from the same operation (a trampoline, up to
//   `inline_budget` in a row), not through another trip around the io_context: that trip
//   costs a reactor poll (a system call) per message.
// While a receive waits the slot keeps itself alive; the client answers every receive once (a
// message, or the subscription's end). Loop thread only. May not: run a handler inside the
// call that started its receive, nor on an executor other than its own.
#pragma once

#include "warren/asio/asio_config.hpp"  // before any Asio header
#include <asio/any_io_executor.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "warren/asio/initiate.hpp"
#include "warren/asio/operation_block.hpp"
#include "warren/client/message.hpp"

namespace warren::asio_driver::detail {

// True when `ex` is the loop's own executor (as a plain callback's, or a coroutine's spawned
// on the connection's io_context, is).
template <class Executor>
[[nodiscard]] bool is_loop(const Executor& ex, const LoopExecutor& loop) {
  if constexpr (std::is_same_v<Executor, LoopExecutor>) {
    return ex == loop;
  } else if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
    const auto* target = ex.template target<LoopExecutor>();
    return target && *target == loop;
  } else {
    return false;
  }
}

class ReceiveSlot : public std::enable_shared_from_this<ReceiveSlot> {
 public:
  ReceiveSlot() = default;
  ReceiveSlot(const ReceiveSlot&) = delete;
  ReceiveSlot& operator=(const ReceiveSlot&) = delete;
  ~ReceiveSlot() {
    drop(std::exchange(held_, nullptr));
    drop(std::exchange(ready_, nullptr));
  }

  [[nodiscard]] bool busy() const noexcept { return held_ != nullptr || ready_ != nullptr; }

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
    // By reference: a Message is large, and std::function would move it into a by-value parameter.
    return [slot = this](Result<client::Message>&& result) { slot->finish(std::move(result)); };
  }

 private:
  // Answers in a row from one posted operation before the next goes around the io_context,
  // so other work on the loop still gets its turn.
  static constexpr int inline_budget = 64;

  struct Held {
    virtual ~Held() = default;
    // Posts the handler with `result` (which the slot keeps until then).
    virtual void post(std::optional<Result<client::Message>>& result, std::shared_ptr<ReceiveSlot>&& keep) = 0;
    // Runs the handler now, on the loop, once this Held is dropped (the handler may receive again).
    virtual void run(ReceiveSlot& slot, std::optional<Result<client::Message>>& result) = 0;
    [[nodiscard]] virtual bool on_loop() const noexcept = 0;
    [[nodiscard]] virtual bool in_place() const noexcept = 0;
  };
  template <class Handler>
  struct KeptHandler final : Held {
    using Executor = asio::associated_executor_t<Handler, LoopExecutor>;
    KeptHandler(Handler h, const LoopExecutor& l) : loop(l), handler(std::move(h)) {
      // The connection keeps its own io_context running; any other executor is held here.
      if (auto ex = asio::get_associated_executor(handler, loop); !is_loop(ex, loop)) work.emplace(ex);
    }
    void post(std::optional<Result<client::Message>>& result, std::shared_ptr<ReceiveSlot>&& keep) override {
      if (work) {
        Completion<client::Message, Handler>(std::move(handler), loop)(std::move(*result));
        return;
      }
      auto* slot = keep.get();
      asio::post(loop, asio::bind_allocator(OperationAllocator<void>(&slot->operation_),
                                            [keep = std::move(keep), h = std::move(handler), &result]() mutable {
                                              keep->trampoline(std::move(h), result);
                                            }));
    }
    void run(ReceiveSlot& slot, std::optional<Result<client::Message>>& result) override {
      Handler h(std::move(handler));
      slot.drop(this);  // its room is free for the receive the handler may start
      std::move(h)(std::move(*result));
    }
    [[nodiscard]] bool on_loop() const noexcept override { return !work; }
    [[nodiscard]] bool in_place() const noexcept override { return fits<KeptHandler>; }
    LoopExecutor loop;
    Handler handler;
    std::optional<asio::executor_work_guard<Executor>> work;
  };

  void finish(Result<client::Message>&& result) {
    auto keep = std::move(self_);  // until `held` is dropped: it may live in this slot
    Held* held = std::exchange(held_, nullptr);
    if (!held) return;
    // Two results taking turns: a handler given one by reference may receive again at once.
    auto& slot_result = results_[next_result_ ^= 1];
    slot_result.emplace(std::move(result));
    if (trampolining_ && held->on_loop()) {
      ready_ = held;  // answered by the trampoline below, once the running handler returns
      ready_result_ = &slot_result;
      return;
    }
    held->post(slot_result, std::shared_ptr<ReceiveSlot>(keep));
    drop(held);
  }

  // Runs a posted handler, then the answers its receives found ready, up to the budget; what
  // is still ready after that goes around the io_context.
  // The posted operation keeps the slot alive meanwhile.
  template <class Handler>
  void trampoline(Handler&& handler, std::optional<Result<client::Message>>& result) {
    trampolining_ = true;
    std::move(handler)(std::move(*result));
    for (int n = 0; ready_ && n < inline_budget; ++n) std::exchange(ready_, nullptr)->run(*this, *ready_result_);
    trampolining_ = false;
    if (Held* held = std::exchange(ready_, nullptr)) {
      held->post(*ready_result_, shared_from_this());
      drop(held);
    }
  }

  static void drop(Held* held) noexcept {
    if (!held) return;
    if (held->in_place()) held->~Held();
    else delete held;
  }

  static constexpr std::size_t room = 256;
  template <class Kept>
  static constexpr bool fits = sizeof(Kept) <= room && alignof(Kept) <= alignof(std::max_align_t);

  // Room for the handlers of use_awaitable, use_future and a plain lambda.
  alignas(std::max_align_t) std::byte storage_[room];
  Held* held_ = nullptr;   // a receive waiting for the client's answer
  Held* ready_ = nullptr;  // answered, to run when the running handler returns (trampoline)
  std::optional<Result<client::Message>>* ready_result_ = nullptr;
  bool trampolining_ = false;
  std::shared_ptr<ReceiveSlot> self_;  // set while a receive waits
  OperationBlocks operation_;          // the posted completion's memory
  // The answers, handed to a handler by reference when it runs.
  std::optional<Result<client::Message>> results_[2];
  unsigned next_result_ = 0;
};

}  // namespace warren::asio_driver::detail
