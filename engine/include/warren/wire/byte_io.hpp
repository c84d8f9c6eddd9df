// Big-endian readers and writers over raw memory: the only place the codec touches bytes.
// Reader never reads past its span (a short read latches `failed`); Writer writes into space
// the caller has already sized exactly, so it checks nothing on the hot path.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace warren::wire {

namespace detail {
// A value in the wire's byte order (big-endian) from the host's, or back: the same swap.
template <class T>
constexpr T big_endian(T v) noexcept {
  if constexpr (std::endian::native == std::endian::big) return v;
  else if constexpr (sizeof(T) == 2) return __builtin_bswap16(v);
  else if constexpr (sizeof(T) == 4) return __builtin_bswap32(v);
  else return __builtin_bswap64(v);
}
// A big-endian value from the sizeof(T) bytes at p, which the caller has checked are there.
template <class T>
T load_big_endian(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return big_endian(v);
}
}  // namespace detail

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) noexcept
      : cur_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  [[nodiscard]] bool failed() const noexcept { return failed_; }
  [[nodiscard]] std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - cur_); }
  [[nodiscard]] const std::byte* position() const noexcept { return cur_; }

  std::uint8_t u8() noexcept {
    if (!need(1)) return 0;
    return static_cast<std::uint8_t>(*cur_++);
  }
  std::uint16_t u16() noexcept { return take<std::uint16_t>(); }
  std::uint32_t u32() noexcept { return take<std::uint32_t>(); }
  std::uint64_t u64() noexcept { return take<std::uint64_t>(); }
  // A view of the next n bytes; empty (and failed) when fewer remain. n comes from the peer,
  // so it is compared with what is there before anything is touched.
  std::span<const std::byte> bytes(std::size_t n) noexcept {
    if (!need(n)) return {};
    std::span<const std::byte> out{cur_, n};
    cur_ += n;
    return out;
  }
  std::string_view shortstr() noexcept { return as_text(bytes(u8())); }
  std::string_view longstr() noexcept { return as_text(bytes(u32())); }

  void fail() noexcept { failed_ = true; cur_ = end_; }

 private:
  bool need(std::size_t n) noexcept {
    if (failed_ || remaining() < n) {
      fail();
      return false;
    }
    return true;
  }
  static std::string_view as_text(std::span<const std::byte> b) noexcept {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  // One load of a big-endian value.
  template <class T>
  T take() noexcept {
    if (!need(sizeof(T))) return 0;
    const T v = detail::load_big_endian<T>(cur_);
    cur_ += sizeof v;
    return v;
  }

  const std::byte* cur_;
  const std::byte* end_;
  bool failed_ = false;
};

class Writer {
 public:
  explicit Writer(std::byte* out) noexcept : cur_(out) {}

  [[nodiscard]] std::byte* position() const noexcept { return cur_; }

  // Each write is one store of the big-endian value through a local pointer: a store through a
  // std::byte* may alias anything, this object's cur_ included, so byte-by-byte stores made
  // the compiler reload cur_ after every byte (frame_start was 25 instructions for 7 bytes).
  void u8(std::uint8_t v) noexcept { put(v); }
  void u16(std::uint16_t v) noexcept { put(detail::big_endian(v)); }
  void u32(std::uint32_t v) noexcept { put(detail::big_endian(v)); }
  void u64(std::uint64_t v) noexcept { put(detail::big_endian(v)); }
  void bytes(std::span<const std::byte> b) noexcept {
    std::byte* at = cur_;
    if (!b.empty()) std::memcpy(at, b.data(), b.size());
    cur_ = at + b.size();
  }
  void text(std::string_view s) noexcept { bytes(std::as_bytes(std::span{s.data(), s.size()})); }

 private:
  template <class T>
  void put(T v) noexcept {
    std::byte* at = cur_;
    std::memcpy(at, &v, sizeof v);
    cur_ = at + sizeof v;
  }

  std::byte* cur_;
};

// Writes a big-endian u32 at a position reserved earlier (a length prefix known only later).
inline void patch_u32(std::byte* at, std::uint32_t v) noexcept { Writer{at}.u32(v); }

}  // namespace warren::wire
