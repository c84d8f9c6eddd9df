// Counts heap allocations in a benchmark binary by replacing the global operator new; the
// benchmarks report allocations per message from it. Include in exactly one file per binary.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

// GCC cannot see that the replaced operator new below is the malloc these free() calls pair with.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace warren::bench {
inline std::size_t allocations = 0;
}

void* operator new(std::size_t n) {
  ++warren::bench::allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }
