// Rule: the W3C traceparent parser takes any bytes without failing; what it accepts is a
// valid context that writes back (as version 00) to text it accepts again as the same
// context, and for version 00 input that text is the input itself.
#include <cstdlib>
#include <string_view>

#include "warren/client/trace_context.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using warren::client::TraceContext;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The first line is the traceparent, the rest its tracestate.
  const auto newline = text.find('\n');
  const auto parent = text.substr(0, newline);
  const auto state = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
  // A tracestate the W3C grammar accepts is within its limits and holds no control byte.
  if (warren::client::valid_tracestate(state)) {
    if (state.size() > 512) std::abort();
    for (const char ch : state)
      if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t') std::abort();
  }
  const auto c = TraceContext::parse(parent, state);
  if (!c) return 0;
  if (!c->valid() || c->tracestate != state) std::abort();
  const std::string written = c->traceparent();
  const auto again = TraceContext::parse(written, state);
  if (!again || !(*again == *c)) std::abort();
  if (parent.starts_with("00") && written != parent) std::abort();
  const auto child = c->child();
  if (child.trace_id != c->trace_id || !child.valid()) std::abort();
  return 0;
}
