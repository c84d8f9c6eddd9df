#include "untrusted_text.hpp"

#include <unistd.h>

namespace warren::cli {
namespace {

constexpr char hex_digits[] = "0123456789abcdef";

void append_hex_byte(std::string& out, unsigned char c) {
  out += "\\x";
  out += hex_digits[c >> 4];
  out += hex_digits[c & 15];
}

void append_u(std::string& out, std::uint32_t cp) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += hex_digits[(cp >> shift) & 15];
}

// Code points a terminal or a text renderer acts on rather than shows.
bool acts(std::uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) ||                  // C1 controls (CSI, OSC, ...)
         (cp >= 0x202A && cp <= 0x202E) ||              // bidirectional embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069) ||              // bidirectional isolates
         cp == 0x2028 || cp == 0x2029;                  // line and paragraph separators
}

}  // namespace

std::optional<CodePoint> utf8_at(std::string_view s, std::size_t i) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return CodePoint{c, 1};
  std::size_t length;
  std::uint32_t cp;
  if ((c & 0xE0) == 0xC0) length = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) length = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) length = 4, cp = c & 0x07;
  else return std::nullopt;
  if (i + length > s.size()) return std::nullopt;
  for (std::size_t k = 1; k < length; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (b & 0x3F);
  }
  if ((length == 2 && cp < 0x80) || (length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return std::nullopt;
  return CodePoint{cp, length};
}

std::string escaped_for_terminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\t' || (c >= 0x20 && c != 0x7F)) out += static_cast<char>(c);
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == 0x1B) out += "\\e";
      else append_hex_byte(out, c);
      ++i;
      continue;
    }
    const auto cp = utf8_at(text, i);
    if (!cp) {
      append_hex_byte(out, c);
      ++i;
      continue;
    }
    if (acts(cp->value)) append_u(out, cp->value);
    else out.append(text.substr(i, cp->length));
    i += cp->length;
  }
  return out;
}

bool stdout_is_terminal() noexcept {
  static const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  return terminal;
}

std::string shown_body(std::string_view body, bool raw) {
  if (raw || !stdout_is_terminal()) return std::string(body);
  return escaped_for_terminal(body);
}

std::string line_field(std::string_view text) {
  bool plain = !text.empty();
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7F || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) return std::string(text);
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c >= 0x7F) append_hex_byte(out, c);
    else out += ch;
  }
  out += '"';
  return out;
}

bool environment_safe(std::string_view value, std::size_t max_bytes) {
  if (value.size() > max_bytes) return false;
  for (std::size_t i = 0; i < value.size();) {
    const auto cp = utf8_at(value, i);
    if (!cp || cp->value < 0x20 || cp->value == 0x7F || (cp->value >= 0x80 && cp->value <= 0x9F)) return false;
    i += cp->length;
  }
  return true;
}

std::string json_line_escaped(std::string dumped) {
  // Every byte of these code points is past ASCII, so they never sit in JSON's own syntax; the
  // dump is valid UTF-8 (invalid bytes were replaced), so decoding never fails here, and a
  // failure would only copy the byte.
  std::string out;
  out.reserve(dumped.size());
  for (std::size_t i = 0; i < dumped.size();) {
    const auto c = static_cast<unsigned char>(dumped[i]);
    if (c == 0x7F) {  // DEL: JSON leaves it raw too, and it sits only inside strings
      append_u(out, c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += dumped[i++];
      continue;
    }
    const auto cp = utf8_at(dumped, i);
    if (!cp) {
      out += dumped[i++];
      continue;
    }
    if (acts(cp->value)) append_u(out, cp->value);
    else out.append(dumped, i, cp->length);
    i += cp->length;
  }
  return out;
}

}  // namespace warren::cli
