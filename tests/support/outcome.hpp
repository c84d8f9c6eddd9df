// A publish's Result (the client's one convention) split back into the engine's outcome
// name and its cause, so tests can say which of confirmed / nacked / returned / timed_out /
// failed happened in one comparison.
#pragma once

#include <utility>

#include "warren/engine/events.hpp"
#include "warren/result.hpp"

namespace warren::test {

inline std::pair<engine::PublishOutcome, Error> split(Result<engine::PublishOutcome> r) {
  if (r.ok()) return {*r, Error{}};
  Error e = std::move(r).error();
  auto o = engine::PublishOutcome::failed;
  if (e.code == make_error_code(errc::timeout)) o = engine::PublishOutcome::timed_out;
  else if (e.code == make_error_code(errc::nacked)) o = engine::PublishOutcome::nacked;
  else if (e.code == make_error_code(errc::unroutable)) o = engine::PublishOutcome::returned;
  return {o, std::move(e)};
}

}  // namespace warren::test
