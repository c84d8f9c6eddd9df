#include "warren/client/pool.hpp"

#include <algorithm>

namespace warren::client {

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::move(other.pool_);
    connection_ = std::move(other.connection_);
  }
  return *this;
}

void Lease::release() {
  auto connection = std::move(connection_);  // leaves connection_ empty
  if (!connection) return;
  if (auto pool = pool_.lock()) pool->give_back(std::move(connection));
}

Pool::Pool(Driver& driver, ConnectionUrl url, PoolOptions options)
    : driver_(driver), url_(std::move(url)), options_(std::move(options)) {
  if (options_.size == 0) options_.size = 1;
}

Pool::~Pool() {
  auto waiters = std::move(waiters_);
  auto closed = std::move(on_closed_);
  if (waiters.empty() && !closed) return;
  driver_.post([waiters = std::move(waiters), closed = std::move(closed)] {
    for (auto& waiter : waiters) waiter(make_error(errc::connection_closed, "the pool was destroyed"));
    if (closed) closed(make_error(errc::connection_closed, "the pool was destroyed before its connections closed"));
  });
}

std::shared_ptr<Pool> Pool::create(Driver& driver, ConnectionUrl url, PoolOptions options) {
  return std::shared_ptr<Pool>(new Pool(driver, std::move(url), std::move(options)));
}

void Pool::borrow(Borrowed done) {
  if (closing_) {
    driver_.post([done = std::move(done)] {
      done(make_error(errc::connection_closed, "the pool is closing"));
    });
    return;
  }
  waiters_.push_back(std::move(done));
  serve();
}

void Pool::serve() {
  while (!waiters_.empty() && !closing_) {
    if (!idle_.empty()) {
      auto connection = std::move(idle_.back());
      idle_.pop_back();
      if (!connection->is_open()) {  // failed while idle, before its close was reported
        drop(connection);
        continue;
      }
      auto waiter = std::move(waiters_.front());
      waiters_.pop_front();
      auto lease = std::shared_ptr<Lease>(new Lease(weak_from_this(), std::move(connection)));
      driver_.post([waiter = std::move(waiter), lease] { waiter(std::move(*lease)); });
      continue;
    }
    // One dial per waiter not already covered by a dial in flight, within the size bound.
    if (slots_ < options_.size && dialling_ < waiters_.size()) {
      dial();
      continue;
    }
    break;
  }
}

void Pool::dial() {
  ++slots_;
  ++dialling_;
  auto holder = std::make_shared<std::shared_ptr<Connection>>();
  std::weak_ptr<Pool> weak = weak_from_this();
  auto fail_one = [this](const Error& cause) {
    if (waiters_.empty()) return;
    auto waiter = std::move(waiters_.front());
    waiters_.pop_front();
    driver_.post([waiter = std::move(waiter), cause] { waiter(cause); });
  };
  *holder = Connection::connect(driver_, url_, options_.client, [this, weak, holder, fail_one](Result<void> r) {
    const Error* e = r ? nullptr : &r.error();
    auto self = weak.lock();
    auto connection = std::move(*holder);
    if (!self) return;
    --dialling_;
    if (e) {
      --slots_;
      fail_one(*e);
      serve();
      maybe_closed();
      return;
    }
    members_.push_back(connection);
    std::weak_ptr<Connection> weak_connection = connection;
    connection->on_closed = [weak, weak_connection](const Error&) {
      auto pool = weak.lock();
      auto c = weak_connection.lock();
      if (pool && c) pool->drop(c);
    };
    if (closing_) {
      connection->close([](Result<void>) {});
      return;
    }
    auto ready = [this, weak, weak_connection, fail_one](Result<void> r) {
      auto self = weak.lock();
      auto c = weak_connection.lock();
      if (!self || !c) return;
      if (!r) {
        fail_one(r.error());
        drop(c);
        c->close([](Result<void>) {});
        return;
      }
      give_back(c);
    };
    if (options_.on_connect) options_.on_connect(*connection, ready);
    else ready(Result<void>());
  });
}

void Pool::give_back(std::shared_ptr<Connection> connection) {
  if (std::find(members_.begin(), members_.end(), connection) == members_.end()) return;  // dropped already
  if (closing_) {
    connection->close([](Result<void>) {});
    return;
  }
  if (!connection->is_open()) {  // it failed while lent: its slot is free once it is gone
    drop(connection);
    return;
  }
  idle_.push_back(std::move(connection));
  serve();
}

void Pool::drop(const std::shared_ptr<Connection>& connection) {
  auto it = std::find(members_.begin(), members_.end(), connection);
  if (it == members_.end()) return;
  members_.erase(it);
  std::erase(idle_, connection);
  --slots_;
  serve();
  maybe_closed();
}

void Pool::close(Callback<void> done) {
  closing_ = true;
  on_closed_ = std::move(done);
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& waiter : waiters)
    driver_.post([waiter = std::move(waiter)] {
      waiter(make_error(errc::connection_closed, "the pool is closing"));
    });
  auto idle = idle_;
  for (auto& c : idle) {
    if (c->is_open()) c->close([](Result<void>) {});
    else drop(c);
  }
  maybe_closed();
}

void Pool::maybe_closed() {
  if (!closing_ || slots_ != 0 || !on_closed_) return;
  auto done = std::move(on_closed_);
  on_closed_ = nullptr;
  driver_.post([done = std::move(done)] { done(Result<void>()); });
}

}  // namespace warren::client
