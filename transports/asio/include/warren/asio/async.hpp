// Completion tokens for the client on Asio, all of them: include this, or the one file you
// need. Every operation completes with `void(warren::Result<T>)` (the whole Error, with the
// broker's reply code and text), works with any token, and may be called from any thread.
//   connection.hpp  async_connect, async_open_channel, async_close
//   channel.hpp     asio_driver::Channel: every channel verb, publish with its outcome, consume
//   consumer.hpp    asio_driver::Consumer: receive (a stream), cancel
//   pool.hpp        asio_driver::Pool: borrow, close
//   session.hpp     for a Session: async_open_channel, async_publish, async_close
//   recovering_channel.hpp  a Session's recovering channel whose setup is a coroutine
//   rpc.hpp         asio_driver::RpcClient: async_start, call
//   initiate.hpp    the one generic initiation path under all of them
#pragma once

#include "warren/asio/channel.hpp"
#include "warren/asio/connection.hpp"
#include "warren/asio/consumer.hpp"
#include "warren/asio/pool.hpp"
#include "warren/asio/rpc.hpp"
#include "warren/asio/session.hpp"
// Only where Asio's coroutines are on (asio_config.hpp, included above, switches them on for
// clang; GCC needs -fcoroutines).
#if defined(ASIO_HAS_CO_AWAIT)
#include "warren/asio/recovering_channel.hpp"
#endif
