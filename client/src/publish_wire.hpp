// Internal: a Publish's method as the engine takes it. Not installed.
#pragma once

#include "warren/client/options.hpp"
#include "warren/wire/methods_basic.hpp"

namespace warren::client::detail {

inline wire::BasicPublish to_wire(const Publish& p) {
  return wire::BasicPublish{.exchange = p.exchange, .routing_key = p.routing_key, .mandatory = p.mandatory};
}

}  // namespace warren::client::detail
