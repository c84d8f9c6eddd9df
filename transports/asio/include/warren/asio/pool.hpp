// A connection pool on Asio: client::Pool with borrow and close as completion-token members.
//
//   auto pool = asio_driver::Pool::create(driver, url, {.size = 4});
//   auto lease = co_await pool.borrow(asio::use_awaitable);   // Result<client::Lease>
//
// Completions as everywhere in warren/asio: `void(Result<T>)`, on the handler's executor else
// the pool's io_context; callable from any thread (started on the loop).
#pragma once

#include <memory>

#include "warren/asio/initiate.hpp"
#include "warren/client/pool.hpp"

namespace warren::asio_driver {

class Pool {
 public:
  [[nodiscard]] static Pool create(AsioDriver& driver, client::ConnectionUrl url, client::PoolOptions options) {
    return Pool(client::Pool::create(driver, std::move(url), std::move(options)), driver.context().get_executor());
  }
  Pool(std::shared_ptr<client::Pool> pool, const detail::LoopExecutor& loop) : pool_(std::move(pool)), loop_(loop) {}

  // An idle healthy connection, a new one, or the next one given back; fails when a dial
  // fails or the pool closes.
  template <class Token>
  auto borrow(Token&& token) const {
    return detail::initiate<client::Lease>(loop_, [pool = pool_](client::Callback<client::Lease> done) {
      pool->borrow(std::move(done));
    }, std::forward<Token>(token));
  }

  // Closes every connection (lent ones as they come back) and fails the waiting borrows.
  template <class Token>
  auto close(Token&& token) const {
    return detail::initiate<void>(loop_, [pool = pool_](client::Callback<void> done) {
      pool->close(std::move(done));
    }, std::forward<Token>(token));
  }

  [[nodiscard]] const std::shared_ptr<client::Pool>& raw() const noexcept { return pool_; }

 private:
  std::shared_ptr<client::Pool> pool_;
  detail::LoopExecutor loop_;
};

}  // namespace warren::asio_driver
