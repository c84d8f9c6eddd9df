#include "warren/client/trace_context.hpp"

#include <algorithm>
#include <random>
#include <variant>

namespace warren::client {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

// A lowercase hex digit's value; -1 for anything else (uppercase is not allowed by the spec).
int lower_hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

template <std::size_t N>
bool read_hex(std::string_view text, std::array<std::uint8_t, N>& out) {
  if (text.size() != 2 * N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = lower_hex_value(text[2 * i]), lo = lower_hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <std::size_t N>
char* write_hex(char* out, const std::array<std::uint8_t, N>& bytes) {
  for (auto b : bytes) {
    *out++ = hex_digits[b >> 4];
    *out++ = hex_digits[b & 15];
  }
  return out;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; });
}

// Random ids from a generator per thread, seeded once from the system: no lock, no syscall
// per id.
template <std::size_t N>
void fill_random(std::array<std::uint8_t, N>& out) {
  thread_local std::mt19937_64 generator = [] {
    std::random_device device;  // several words: one 32-bit seed would give only 2^32 id streams
    std::seed_seq seed{device(), device(), device(), device(), device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  do {
    for (std::size_t i = 0; i < N; i += 8) {
      auto r = generator();
      for (std::size_t j = i; j < std::min(N, i + 8); ++j, r >>= 8) out[j] = static_cast<std::uint8_t>(r);
    }
  } while (all_zero(out));
}

}  // namespace

std::array<char, 55> TraceContext::traceparent_chars() const noexcept {
  std::array<char, 55> out{};
  char* p = out.data();
  *p++ = '0';
  *p++ = '0';
  *p++ = '-';
  p = write_hex(p, trace_id);
  *p++ = '-';
  p = write_hex(p, span_id);
  *p++ = '-';
  write_hex(p, std::array<std::uint8_t, 1>{flags});
  return out;
}

std::string TraceContext::traceparent() const {
  const auto chars = traceparent_chars();
  return std::string(chars.data(), chars.size());
}

std::optional<TraceContext> TraceContext::parse(std::string_view text, std::string_view tracestate) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  if (text.size() < 55 || text[2] != '-' || text[35] != '-' || text[52] != '-') return std::nullopt;
  std::array<std::uint8_t, 1> version{};
  if (!read_hex(text.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  // Version 00 is exactly its four fields; a later one may add fields after a '-'.
  if (version[0] == 0 ? text.size() != 55 : (text.size() > 55 && text[55] != '-')) return std::nullopt;
  TraceContext c;
  std::array<std::uint8_t, 1> flags{};
  if (!read_hex(text.substr(3, 32), c.trace_id) || !read_hex(text.substr(36, 16), c.span_id) ||
      !read_hex(text.substr(53, 2), flags))
    return std::nullopt;
  c.flags = flags[0];
  if (!c.valid()) return std::nullopt;
  c.tracestate = tracestate;
  return c;
}

std::optional<TraceContext> TraceContext::from(const wire::FieldTable& headers) {
  const auto text = [&](std::string_view key) -> std::optional<std::string_view> {
    const auto* v = headers.find(key);
    const auto* s = v ? std::get_if<std::string>(&v->value) : nullptr;
    return s ? std::optional<std::string_view>(*s) : std::nullopt;
  };
  const auto parent = text("traceparent");
  if (!parent) return std::nullopt;
  return parse(*parent, text("tracestate").value_or(std::string_view{}));
}

TraceContext TraceContext::child() const {
  TraceContext c = *this;
  fill_random(c.span_id);
  return c;
}

TraceContext TraceContext::new_root() {
  TraceContext c;
  fill_random(c.trace_id);
  fill_random(c.span_id);
  c.flags = 1;
  return c;
}

namespace {

bool key_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/'; }

// simple-key: lcalpha 0*255(key chars); multi-tenant: (lcalpha / digit) 0*240(...) "@" lcalpha 0*13(...).
bool valid_key(std::string_view key) {
  const auto at = key.find('@');
  auto part = [](std::string_view p, std::size_t max, bool digit_first) {
    if (p.empty() || p.size() > max) return false;
    const char first = p.front();
    if (!((first >= 'a' && first <= 'z') || (digit_first && first >= '0' && first <= '9'))) return false;
    for (char c : p)
      if (!key_char(c)) return false;
    return true;
  };
  if (at == std::string_view::npos) return part(key, 256, false);
  return part(key.substr(0, at), 241, true) && part(key.substr(at + 1), 14, false);
}

// 0*255(chr) nblk-chr: chr is space or nblk-chr (%x21-2B / %x2D-3C / %x3E-7E).
bool valid_value(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (char c : value)
    if (c < 0x20 || c > 0x7E || c == ',' || c == '=') return false;
  return true;
}

}  // namespace

bool valid_tracestate(std::string_view tracestate) noexcept {
  if (tracestate.size() > 512) return false;
  std::size_t members = 0;
  while (true) {
    const auto comma = tracestate.find(',');
    std::string_view member = tracestate.substr(0, comma);
    // Optional whitespace around a member; an empty member is allowed (and not counted).
    while (!member.empty() && (member.front() == ' ' || member.front() == '\t')) member.remove_prefix(1);
    while (!member.empty() && (member.back() == ' ' || member.back() == '\t')) member.remove_suffix(1);
    if (!member.empty()) {
      const auto eq = member.find('=');
      if (eq == std::string_view::npos || !valid_key(member.substr(0, eq)) || !valid_value(member.substr(eq + 1))) return false;
      if (++members > 32) return false;
    }
    if (comma == std::string_view::npos) return true;
    tracestate.remove_prefix(comma + 1);
  }
}

}  // namespace warren::client
