// A pool of connections lent for scoped work: borrow one, use it, let the Lease go. At most
// `size` connections exist at once, counting those being dialled, and a dead one is dropped
// before its replacement is dialled, so `size` bounds the sockets open even while many
// borrowers wait. A connection that failed (its latch is set) is never lent again; the next
// borrow that needs one dials afresh, and `on_connect` runs on every new connection so the
// application can declare what it needs there. The pool replays nothing: no topology, no
// consumers. Borrowers wait in order; a borrow that cannot be served fails when a dial fails
// or when the pool closes.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "warren/client/connection.hpp"

namespace warren::client {

class Pool;

// Exclusive use of one pooled connection until the Lease is destroyed or released.
class Lease {
 public:
  Lease() = default;
  Lease(Lease&& other) noexcept : pool_(std::move(other.pool_)), connection_(std::move(other.connection_)) {}
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { release(); }

  [[nodiscard]] Connection& operator*() const { return *connection_; }
  [[nodiscard]] Connection* operator->() const { return connection_.get(); }
  [[nodiscard]] const std::shared_ptr<Connection>& connection() const { return connection_; }
  explicit operator bool() const { return connection_ != nullptr; }
  void release();  // hands the connection back now

 private:
  friend class Pool;
  Lease(std::weak_ptr<Pool> pool, std::shared_ptr<Connection> connection)
      : pool_(std::move(pool)), connection_(std::move(connection)) {}
  std::weak_ptr<Pool> pool_;
  std::shared_ptr<Connection> connection_;
};

struct PoolOptions {
  std::size_t size = 4;  // connections open at most, dialling ones included
  ClientOptions client{};
  // Runs on each new connection before it is first lent; `done` with success lends it, with
  // an error fails the borrow and drops the connection.
  std::function<void(Connection& connection, Callback<void> done)> on_connect{};
};

class Pool : public std::enable_shared_from_this<Pool> {
 public:
  using Borrowed = Callback<Lease>;

  [[nodiscard]] static std::shared_ptr<Pool> create(Driver& driver, ConnectionUrl url, PoolOptions options);
  // Dropping the pool closes its idle connections' sockets; a lent connection stays with its
  // Lease. Waiting borrows and a close in progress are still told (connection_closed), from
  // the loop.
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Lends an idle healthy connection, or dials one if fewer than `size` exist, or waits for
  // one to come back. `done` never runs inside this call.
  void borrow(Borrowed done);
  // Closes idle connections and, as leases come back, the lent ones; fails every waiting
  // borrow. `done` runs once every connection is closed.
  void close(Callback<void> done);

  [[nodiscard]] std::size_t open() const noexcept { return slots_; }   // open or dialling
  [[nodiscard]] std::size_t idle() const noexcept { return idle_.size(); }
  [[nodiscard]] std::size_t waiting() const noexcept { return waiters_.size(); }

 private:
  friend class Lease;
  Pool(Driver& driver, ConnectionUrl url, PoolOptions options);
  void give_back(std::shared_ptr<Connection> connection);
  void serve();  // match waiters with idle connections, or dial for them
  void dial();
  void drop(const std::shared_ptr<Connection>& connection);  // frees its slot
  void maybe_closed();

  Driver& driver_;
  ConnectionUrl url_;
  PoolOptions options_;
  std::size_t slots_ = 0;    // connections open, lent or dialling
  std::size_t dialling_ = 0;
  std::vector<std::shared_ptr<Connection>> idle_;
  std::vector<std::shared_ptr<Connection>> members_;  // every open connection, lent or idle
  std::deque<Borrowed> waiters_;
  bool closing_ = false;
  Callback<void> on_closed_;
};

}  // namespace warren::client
