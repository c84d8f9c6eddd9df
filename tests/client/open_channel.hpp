// A channel opened on the fake driver's loop, for tests that need one before they start.
#pragma once

#include <stdexcept>

#include "client/fake_driver.hpp"
#include "warren/client/connection.hpp"

namespace warren::test {

inline client::Channel open_channel_now(FakeDriver& driver, client::Connection& c) {
  client::Channel ch;
  c.open_channel([&](Result<client::Channel> r) {
    if (r) ch = *r;
  });
  driver.run();
  if (!ch.is_open()) throw std::runtime_error("channel did not open");
  return ch;
}

}  // namespace warren::test
