// Rule: what crosses the trust boundary into warren's output — a publisher's body, headers and
// properties, a broker's text — comes out safe, whatever the bytes (tools/warren/
// untrusted_text.hpp, message_json.hpp):
// - a message as JSON is one line of valid JSON, never an exception, holding no C0 control,
//   DEL, C1 control, bidirectional override or line separator raw; every header's bytes survive
//   (a table warren cannot decode is there as base64);
// - text escaped for a terminal is valid UTF-8 without anything a terminal acts on;
// - a result-line field holds only printable ASCII, and a space only inside its quotes;
// - what environment_safe accepts is UTF-8 without a control character (C0, DEL, C1).
// Input: a length byte for the body, the body, a length byte for a property, the property,
// then the rest as a header table's encoded bytes.
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "message_json.hpp"
#include "untrusted_text.hpp"
#include "warren/wire/field_table.hpp"
#include "warren/wire/properties.hpp"

namespace {

using namespace warren;

// No raw byte below 0x20 and no UTF-8 of a code point a terminal or renderer acts on.
void require_inert(std::string_view out, bool tab_allowed) {
  for (std::size_t i = 0; i < out.size();) {
    const auto c = static_cast<unsigned char>(out[i]);
    if ((c < 0x20 && !(tab_allowed && c == '\t')) || c == 0x7F) std::abort();
    const auto cp = cli::utf8_at(out, i);
    if (!cp) std::abort();  // not UTF-8
    const auto v = cp->value;
    if ((v >= 0x80 && v <= 0x9F) || (v >= 0x202A && v <= 0x202E) || (v >= 0x2066 && v <= 0x2069) || v == 0x2028 || v == 0x2029)
      std::abort();
    i += cp->length;
  }
}

std::string_view take(std::string_view& in) {
  if (in.empty()) return {};
  const std::size_t n = std::min<std::size_t>(static_cast<unsigned char>(in.front()), in.size() - 1);
  const auto out = in.substr(1, n);
  in.remove_prefix(1 + n);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto body = take(in);
  const auto property = take(in);
  const std::span<const std::byte> table_bytes(reinterpret_cast<const std::byte*>(in.data()), in.size());

  // Text for a terminal, a result line, an environment.
  require_inert(cli::escaped_for_terminal(body), /*tab_allowed=*/true);
  const std::string field = cli::line_field(body);
  const bool quoted = field.size() >= 2 && field.front() == '"' && field.back() == '"';
  for (const char ch : field) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7F || (c == ' ' && !quoted)) std::abort();
  }
  if (cli::environment_safe(property))
    for (std::size_t i = 0; i < property.size();) {
      const auto cp = cli::utf8_at(property, i);
      if (!cp || cp->value < 0x20 || (cp->value >= 0x7F && cp->value <= 0x9F)) std::abort();
      i += cp->length;
    }

  // A message as JSON: the table as the engine hands a message's headers on, when its bytes are
  // within bounds (validate_table_bounds: a table nested too deep is still delivered).
  wire::BasicProperties p;
  p.message_id = property;
  p.user_id = property;
  if (wire::validate_table_bounds(table_bytes).ok()) p.headers = wire::TableRef::validated(table_bytes);
  engine::Message m;
  m.exchange = property;
  m.routing_key = body;
  m.body = std::as_bytes(std::span{body.data(), body.size()});
  m.properties = &p;
  const cli::Json j = cli::message_json(m);
  const std::string line = cli::json_line(j);
  require_inert(line, /*tab_allowed=*/false);
  const auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) std::abort();
  if (p.headers && !parsed.contains("headers")) std::abort();
  return 0;
}
