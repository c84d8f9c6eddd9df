// A Session's close on Asio as a completion token (`void(Result<void>)`): it stops
// reconnecting, fails what still waits and closes the connection. Callable from any thread.
#pragma once

#include <memory>

#include "warren/asio/initiate.hpp"
#include "warren/client/session.hpp"

namespace warren::asio_driver {

template <class Token>
auto async_close(std::shared_ptr<client::Session> session, Token&& token) {
  const auto loop = detail::loop_executor(session->driver());
  return detail::initiate<void>(loop, [session = std::move(session)](client::Callback<void> done) {
    session->close(std::move(done));
  }, std::forward<Token>(token));
}

}  // namespace warren::asio_driver
