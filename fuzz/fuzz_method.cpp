// Rule: any method payload decodes or fails with a clear error; what decodes re-encodes, and
// the re-encoded bytes decode to the same method.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  warren::fuzz::check_method_round_trip(std::span(reinterpret_cast<const std::byte*>(data), size));
  return 0;
}
