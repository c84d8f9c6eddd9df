// The messaging patterns on Asio through completion tokens, as warren/asio does for the
// client: every callback operation of the layer as an `async_*` free function completing with
// `void(warren::Result<T>)`, so
//
//   auto put = co_await messaging::async_put(queue, job, asio::use_awaitable);
//   if (!put) log(put.error().to_string());   // the broker's reply code and text, as ever
//
// Any token works (use_awaitable, use_future, experimental::deferred, a plain callback), from
// any thread: each goes through asio_driver::detail::initiate, which starts the operation on
// the layer's loop and posts its completion. What a subscription calls per message
// (on_item, on_message, on_entry, on_end, on_event) stays a plain callback on the loop:
// only the completion is a token.
//
// Header-only, so warren-messaging does not depend on Asio: include it and link warren-asio,
// with the layer's connection on an AsioDriver (else std::logic_error). Every start function
// owns what it uses (the handle, options, and copies of every string_view and table), so a
// deferred token may be launched after the caller's strings are gone. It holds the handle only
// until the operation is started: keep it while the operation runs, as with the callbacks.
//
// The options are views (trivially destructible), so they are written inline in a co_await
// with GCC 12 as with clang (see warren/asio/connection.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "warren/asio/initiate.hpp"
#include "warren/messaging/backplane.hpp"
#include "warren/messaging/direct.hpp"
#include "warren/messaging/kept_options.hpp"
#include "warren/messaging/log.hpp"
#include "warren/messaging/messaging.hpp"
#include "warren/messaging/subscription.hpp"
#include "warren/messaging/work_queue.hpp"

namespace warren::messaging {
namespace asio_detail {

using asio_driver::detail::initiate;
using asio_driver::detail::loop_executor;

}  // namespace asio_detail

// ---- the layer

// Ends every subscription and closes the layer's channels (never the connection).
template <class Token>
auto async_close(std::shared_ptr<Messaging> layer, Token&& token) {
  const auto loop = asio_detail::loop_executor(layer->driver());
  return asio_detail::initiate<void>(
      loop, [layer = std::move(layer)](client::Callback<void> done) { layer->close(std::move(done)); },
      std::forward<Token>(token));
}

// basic.cancel and the subscription's channel closed (a worker, a group member).
template <class Token>
auto async_cancel(std::shared_ptr<Subscription> subscription, Token&& token) {
  const auto loop = asio_detail::loop_executor(subscription->driver());
  return asio_detail::initiate<void>(
      loop, [subscription = std::move(subscription)](client::Callback<void> done) { subscription->cancel(std::move(done)); },
      std::forward<Token>(token));
}

// ---- work queue

// The work queue, its dead-letter queue and its retry levels (idempotent).
template <class Token>
auto async_declare(std::shared_ptr<WorkQueue> queue, Token&& token) {
  const auto loop = asio_detail::loop_executor(queue->layer()->driver());
  return asio_detail::initiate<void>(
      loop, [queue = std::move(queue)](client::Callback<void> done) { queue->declare(std::move(done)); },
      std::forward<Token>(token));
}

// One message, confirmed (the topology declared first, once per WorkQueue).
template <class Token>
auto async_put(std::shared_ptr<WorkQueue> queue, const PutOptions& options, Token&& token) {
  const auto loop = asio_detail::loop_executor(queue->layer()->driver());
  return asio_detail::initiate<void>(
      loop,
      [queue = std::move(queue), owned = KeptPut(options)](client::Callback<void> done) {
        queue->put(owned.view(), std::move(done));
      },
      std::forward<Token>(token));
}

// A worker: `on_item` is called on the loop for each message; completes once it consumes.
template <class Token>
auto async_consume(std::shared_ptr<WorkQueue> queue, WorkerOptions options, std::function<void(WorkItem)> on_item,
                   Token&& token) {
  const auto loop = asio_detail::loop_executor(queue->layer()->driver());
  return asio_detail::initiate<std::shared_ptr<Subscription>>(
      loop,
      [queue = std::move(queue), options, on_item = std::move(on_item)](
          client::Callback<std::shared_ptr<Subscription>> done) mutable {
        queue->consume(options, std::move(on_item), std::move(done));
      },
      std::forward<Token>(token));
}

// The item is settled by this call, so it is taken whole: through a retry level, or into the
// dead-letter queue once its attempts are spent (WorkItem::retry).
template <class Token>
auto async_retry(WorkItem item, RetryOptions options, Token&& token) {
  const auto loop = asio_detail::loop_executor(item.driver());
  return asio_detail::initiate<Retried>(
      loop,
      [item = std::move(item), owned = KeptRetry(options)](client::Callback<Retried> done) mutable {
        item.retry(owned.view(), std::move(done));
      },
      std::forward<Token>(token));
}

// Straight into the dead-letter queue with `reason` (WorkItem::dead_letter).
template <class Token>
auto async_dead_letter(WorkItem item, std::string reason, RetryOptions options, Token&& token) {
  const auto loop = asio_detail::loop_executor(item.driver());
  return asio_detail::initiate<void>(
      loop,
      [item = std::move(item), reason = std::move(reason), owned = KeptRetry(options)](
          client::Callback<void> done) mutable {
        item.dead_letter(std::move(reason), owned.view(), std::move(done));
      },
      std::forward<Token>(token));
}

// ---- direct

// Mandatory and confirmed: an address nobody listens on fails with errc::unroutable.
template <class Token>
auto async_send(std::shared_ptr<Messaging> layer, const SendOptions& options, Token&& token) {
  const auto loop = asio_detail::loop_executor(layer->driver());
  return asio_detail::initiate<void>(
      loop,
      [layer = std::move(layer), owned = KeptSend(options)](client::Callback<void> done) {
        messaging::send(layer, owned.view(), std::move(done));
      },
      std::forward<Token>(token));
}

template <class Token>
auto async_open_inbox(std::shared_ptr<Messaging> layer, InboxOptions options, OnDirect on_message, Token&& token) {
  const auto loop = asio_detail::loop_executor(layer->driver());
  return asio_detail::initiate<std::shared_ptr<Inbox>>(
      loop,
      [layer = std::move(layer), options, on_message = std::move(on_message)](
          client::Callback<std::shared_ptr<Inbox>> done) mutable {
        messaging::open_inbox(layer, options, std::move(on_message), std::move(done));
      },
      std::forward<Token>(token));
}

// A member of the service group on `options.address`.
template <class Token>
auto async_join_group(std::shared_ptr<Messaging> layer, GroupOptions options, OnDirect on_message, Token&& token) {
  const auto loop = asio_detail::loop_executor(layer->driver());
  return asio_detail::initiate<std::shared_ptr<Subscription>>(
      loop,
      [layer = std::move(layer), address = std::string(options.address), prefetch = options.prefetch,
       on_message = std::move(on_message)](client::Callback<std::shared_ptr<Subscription>> done) mutable {
        messaging::join_group(layer, {.address = address, .prefetch = prefetch}, std::move(on_message), std::move(done));
      },
      std::forward<Token>(token));
}

template <class Token>
auto async_close(std::shared_ptr<Inbox> inbox, Token&& token) {
  const auto loop = asio_detail::loop_executor(inbox->driver());
  return asio_detail::initiate<void>(
      loop, [inbox = std::move(inbox)](client::Callback<void> done) { inbox->close(std::move(done)); },
      std::forward<Token>(token));
}

// ---- log

template <class Token>
auto async_declare(std::shared_ptr<Log> log, Token&& token) {
  const auto loop = asio_detail::loop_executor(log->driver());
  return asio_detail::initiate<void>(
      loop, [log = std::move(log)](client::Callback<void> done) { log->declare(std::move(done)); },
      std::forward<Token>(token));
}

// Completes with the entry's offset.
template <class Token>
auto async_append(std::shared_ptr<Log> log, std::string_view body, Token&& token) {
  const auto loop = asio_detail::loop_executor(log->driver());
  return asio_detail::initiate<std::uint64_t>(
      loop,
      [log = std::move(log), body = std::string(body)](client::Callback<std::uint64_t> done) {
        log->append(body, std::move(done));
      },
      std::forward<Token>(token));
}

// The highest offset now (nullopt: empty).
template <class Token>
auto async_tip(std::shared_ptr<Log> log, Token&& token) {
  const auto loop = asio_detail::loop_executor(log->driver());
  return asio_detail::initiate<std::optional<std::uint64_t>>(
      loop,
      [log = std::move(log)](client::Callback<std::optional<std::uint64_t>> done) { log->tip(std::move(done)); },
      std::forward<Token>(token));
}

// A catch-up page (Log::read): complete once it reached the tip it read first.
template <class Token>
auto async_read(std::shared_ptr<Log> log, ReadOptions options, Token&& token) {
  const auto loop = asio_detail::loop_executor(log->driver());
  return asio_detail::initiate<Page>(
      loop,
      [log = std::move(log), from = KeptFrom(options.from), max_entries = options.max_entries](
          client::Callback<Page> done) mutable {
        log->read({.from = from.view(), .max_entries = max_entries}, std::move(done));
      },
      std::forward<Token>(token));
}

// A live tail: `on_entry` and `on_end` are called on the loop; completes once it consumes.
template <class Token>
auto async_follow(std::shared_ptr<Log> log, From from,
                  std::function<void(const client::Delivery& d, std::uint64_t offset)> on_entry,
                  std::function<void(const Error&)> on_end, Token&& token) {
  const auto loop = asio_detail::loop_executor(log->driver());
  return asio_detail::initiate<std::shared_ptr<LogTail>>(
      loop,
      [log = std::move(log), from = KeptFrom(from), on_entry = std::move(on_entry), on_end = std::move(on_end)](
          client::Callback<std::shared_ptr<LogTail>> done) mutable {
        log->follow(from.view(), std::move(on_entry), std::move(on_end), std::move(done));
      },
      std::forward<Token>(token));
}

template <class Token>
auto async_close(std::shared_ptr<LogTail> tail, Token&& token) {
  const auto loop = asio_detail::loop_executor(tail->driver());
  return asio_detail::initiate<void>(
      loop, [tail = std::move(tail)](client::Callback<void> done) { tail->close(std::move(done)); },
      std::forward<Token>(token));
}

// ---- backplane

// The instance's queue and consumer (Backplane::start); `on_event` is called on the loop.
template <class Token>
auto async_start_backplane(std::shared_ptr<Messaging> layer, BackplaneOptions options, OnRoomEvent on_event,
                           Token&& token) {
  const auto loop = asio_detail::loop_executor(layer->driver());
  return asio_detail::initiate<std::shared_ptr<Backplane>>(
      loop,
      [layer = std::move(layer), options, on_event = std::move(on_event)](
          client::Callback<std::shared_ptr<Backplane>> done) mutable {
        Backplane::start(layer, options, std::move(on_event), std::move(done));
      },
      std::forward<Token>(token));
}

template <class Token>
auto async_join(std::shared_ptr<Backplane> backplane, std::string room, Token&& token) {
  const auto loop = asio_detail::loop_executor(backplane->driver());
  return asio_detail::initiate<void>(
      loop,
      [backplane = std::move(backplane), room = std::move(room)](client::Callback<void> done) mutable {
        backplane->join(std::move(room), std::move(done));
      },
      std::forward<Token>(token));
}

template <class Token>
auto async_leave(std::shared_ptr<Backplane> backplane, std::string room, Token&& token) {
  const auto loop = asio_detail::loop_executor(backplane->driver());
  return asio_detail::initiate<void>(
      loop,
      [backplane = std::move(backplane), room = std::move(room)](client::Callback<void> done) mutable {
        backplane->leave(std::move(room), std::move(done));
      },
      std::forward<Token>(token));
}

// To every instance in `room`, confirmed (a room nobody is in takes it nowhere, no error).
template <class Token>
auto async_publish(std::shared_ptr<Backplane> backplane, std::string_view room, std::string_view body, Token&& token) {
  const auto loop = asio_detail::loop_executor(backplane->driver());
  return asio_detail::initiate<void>(
      loop,
      [backplane = std::move(backplane), room = std::string(room), body = std::string(body)](
          client::Callback<void> done) { backplane->publish(room, body, std::move(done)); },
      std::forward<Token>(token));
}

template <class Token>
auto async_close(std::shared_ptr<Backplane> backplane, Token&& token) {
  const auto loop = asio_detail::loop_executor(backplane->driver());
  return asio_detail::initiate<void>(
      loop, [backplane = std::move(backplane)](client::Callback<void> done) { backplane->close(std::move(done)); },
      std::forward<Token>(token));
}

}  // namespace warren::messaging
