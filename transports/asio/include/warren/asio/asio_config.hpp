// Asio's C++20 coroutines, switched on where the compiler has them. Debian 12's Asio detects
// coroutine support on GCC (with -fcoroutines) and MSVC only: with clang it needs
// ASIO_HAS_CO_AWAIT and ASIO_HAS_STD_COROUTINE, or co_await and use_awaitable do not compile.
// Every warren header that includes Asio includes this first, so a program that includes
// warren's headers before Asio's own needs no flags; the pkg-config file and the CMake
// package carry them too, for a program that includes Asio first.
#pragma once

#if defined(__clang__) && defined(__cpp_impl_coroutine) && !defined(ASIO_HAS_CO_AWAIT) && !defined(ASIO_DISABLE_CO_AWAIT)
#if __has_include(<coroutine>)
#define ASIO_HAS_CO_AWAIT 1
#define ASIO_HAS_STD_COROUTINE 1
#endif
#endif
