// Inlining forced where the compiler's heuristics stop short on a hot path. A codec visitor is
// called once per field: out of line it is a dozen instructions of call around one store, and
// inlined its bookkeeping (which bit of the octet comes next) folds to constants.
#pragma once

// And kept out of line where a hot caller only tests for a rare case (an error's text).
#if defined(__GNUC__) || defined(__clang__)
#define WARREN_ALWAYS_INLINE [[gnu::always_inline]] inline
#define WARREN_NOINLINE [[gnu::noinline]]
#else
#define WARREN_ALWAYS_INLINE inline
#define WARREN_NOINLINE
#endif
