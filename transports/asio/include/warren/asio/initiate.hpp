// The one path from an Asio completion token to a client operation; every token form in
// warren/asio goes through initiate<T>. An operation completes with `void(warren::Result<T>)`,
// so `co_await op(..., asio::use_awaitable)` yields a Result<T> carrying the whole Error (the
// broker's reply code and text): no exception, nothing lost to a bare error_code. Any token
// works (use_awaitable, use_future, experimental::deferred, a plain callback).
//
// What this file may not do: capture a reference that a deferred token could outlive (a
// start function owns what it uses), run the client off its loop thread (it is dispatched
// there), or complete on Asio's system executor (a handler without an executor of its own
// completes on the connection's io_context).
#pragma once

#include "warren/asio/asio_config.hpp"  // before any Asio header
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/dispatch.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <memory>
#include <stdexcept>
#include <utility>

#include "warren/asio/asio_driver.hpp"
#include "warren/client/connection.hpp"

namespace warren::asio_driver::detail {

using LoopExecutor = asio::io_context::executor_type;

// The loop a connection runs on. (Asio's default for a plain callback is the system executor,
// a thread pool of its own, where a callback that calls the client again would race the loop.)
inline LoopExecutor loop_executor(client::Driver& driver) {
  auto* asio_driver = dynamic_cast<AsioDriver*>(&driver);
  if (!asio_driver) throw std::logic_error("warren's Asio completion tokens need a connection on an AsioDriver");
  return asio_driver->context().get_executor();
}
inline LoopExecutor loop_executor(const client::Connection& connection) { return loop_executor(connection.driver()); }

// A handler and the work it holds on its executor until it is handed its result.
template <class T, class Handler>
class Completion {
 public:
  Completion(Handler handler, const LoopExecutor& loop)
      : work_(asio::make_work_guard(handler, loop)), handler_(std::move(handler)) {}

  // Always posted: a handler never runs inside the call that started its operation, nor
  // inside the client's event dispatch.
  void operator()(Result<T> result) {
    asio::post(work_.get_executor(), [handler = std::move(handler_), result = std::move(result)]() mutable {
      std::move(handler)(std::move(result));
    });
    work_.reset();  // the posted handler is the executor's work from here
  }

 private:
  asio::executor_work_guard<asio::associated_executor_t<Handler, LoopExecutor>> work_;
  Handler handler_;
};

// The client's callback for one operation. client::Callback is a copyable std::function and
// Asio handlers are move-only, so the handler lives in one shared block.
template <class T, class Handler>
[[nodiscard]] client::Callback<T> to_callback(Handler handler, const LoopExecutor& loop) {
  auto completion = std::make_shared<Completion<T, Handler>>(std::move(handler), loop);
  return [completion = std::move(completion)](Result<T> result) { (*completion)(std::move(result)); };
}

// Starts `start(client::Callback<T>)` on the loop thread (at once when already there) and
// completes the token with what the callback is given. `start` must own everything it uses.
template <class T, class Start, class Token>
auto initiate(const LoopExecutor& loop, Start start, Token&& token) {
  return asio::async_initiate<Token, void(Result<T>)>(
      [loop](auto handler, Start start_fn) {
        asio::dispatch(loop, [start_fn = std::move(start_fn), done = to_callback<T>(std::move(handler), loop)]() mutable {
          std::move(start_fn)(std::move(done));
        });
      },
      token, std::move(start));
}

// Result<From> to Result<To>: the value through `convert`, the error as it is.
template <class To, class From, class Convert>
[[nodiscard]] Result<To> map(Result<From>&& from, Convert convert) {
  if (!from.ok()) return std::move(from).error();
  return convert(std::move(from).value());
}

}  // namespace warren::asio_driver::detail
