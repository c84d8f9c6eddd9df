// Big-endian readers and writers over raw memory: the only place the codec touches bytes.
// Reader never reads past its span (a short read latches `failed`); Writer writes into space
// the caller has already sized exactly, so it checks nothing on the hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace warren::wire {

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
  std::uint16_t u16() noexcept {
    if (!need(2)) return 0;
    auto v = static_cast<std::uint16_t>((std::to_integer<unsigned>(cur_[0]) << 8) |
                                        std::to_integer<unsigned>(cur_[1]));
    cur_ += 2;
    return v;
  }
  std::uint32_t u32() noexcept {
    if (!need(4)) return 0;
    std::uint32_t v = (std::to_integer<std::uint32_t>(cur_[0]) << 24) |
                      (std::to_integer<std::uint32_t>(cur_[1]) << 16) |
                      (std::to_integer<std::uint32_t>(cur_[2]) << 8) |
                      std::to_integer<std::uint32_t>(cur_[3]);
    cur_ += 4;
    return v;
  }
  std::uint64_t u64() noexcept {
    std::uint64_t hi = u32();
    std::uint64_t lo = u32();
    return (hi << 32) | lo;
  }
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

  const std::byte* cur_;
  const std::byte* end_;
  bool failed_ = false;
};

class Writer {
 public:
  explicit Writer(std::byte* out) noexcept : cur_(out) {}

  [[nodiscard]] std::byte* position() const noexcept { return cur_; }

  void u8(std::uint8_t v) noexcept { *cur_++ = std::byte{v}; }
  void u16(std::uint16_t v) noexcept {
    cur_[0] = std::byte(v >> 8);
    cur_[1] = std::byte(v);
    cur_ += 2;
  }
  void u32(std::uint32_t v) noexcept {
    cur_[0] = std::byte(v >> 24);
    cur_[1] = std::byte(v >> 16);
    cur_[2] = std::byte(v >> 8);
    cur_[3] = std::byte(v);
    cur_ += 4;
  }
  void u64(std::uint64_t v) noexcept {
    u32(static_cast<std::uint32_t>(v >> 32));
    u32(static_cast<std::uint32_t>(v));
  }
  void bytes(std::span<const std::byte> b) noexcept {
    if (!b.empty()) std::memcpy(cur_, b.data(), b.size());
    cur_ += b.size();
  }
  void text(std::string_view s) noexcept { bytes(std::as_bytes(std::span{s.data(), s.size()})); }

 private:
  std::byte* cur_;
};

// Writes a big-endian u32 at a position reserved earlier (a length prefix known only later).
inline void patch_u32(std::byte* at, std::uint32_t v) noexcept { Writer{at}.u32(v); }

}  // namespace warren::wire
