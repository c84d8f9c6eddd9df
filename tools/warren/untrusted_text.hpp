// Text another party wrote (a publisher's body, message_id or headers, a broker's reply text)
// made safe where warren shows it: a terminal, a result line a script splits, a child's
// environment, a JSON line. docs/warren-cli.md, "SECURITY", says what each escapes. Pure
// functions but the one question about where output goes; fuzz/fuzz_untrusted_output.cpp holds
// them to their promises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace warren::cli {

// One UTF-8 sequence at `text[i]`: its code point and its length in bytes; nothing when the
// bytes there are not valid UTF-8 (overlong, a surrogate, past U+10FFFF, cut short).
struct CodePoint {
  std::uint32_t value;
  std::size_t length;
};
[[nodiscard]] std::optional<CodePoint> utf8_at(std::string_view text, std::size_t i) noexcept;

// For a terminal: what could move the cursor, retitle the window, switch colours or reorder
// what follows is shown escaped, the rest as it is (so not reversible: --raw gives the bytes).
// Escaped: C0 controls but TAB (\n, \r, \e, else \xHH), DEL (\x7f), C1 controls (\u0080 to
// \u009f), bidirectional overrides and isolates, U+2028 and U+2029 (\u202e, ...), and every
// byte that is not part of valid UTF-8 (\xHH).
[[nodiscard]] std::string escaped_for_terminal(std::string_view text);

// Whether standard output is a terminal (asked once).
[[nodiscard]] bool stdout_is_terminal() noexcept;
// A body or reply as a command prints it: escaped for a terminal, unless the output is not one
// (a pipe, a file: the bytes as they are, as scripts read them) or --raw asked for the bytes.
[[nodiscard]] std::string shown_body(std::string_view body, bool raw);

// For one field of a result line ("done <id> attempt=1"): printed as it is when it is printable
// ASCII without space, quote or backslash (a UUID, an order number); else double-quoted with
// C escapes (\", \\, \n, \r, \t, \xHH for every other control and for every byte past ASCII),
// so a field never holds a space, a line break or anything a terminal acts on. An empty field
// is "" (the caller may print its own placeholder first).
[[nodiscard]] std::string line_field(std::string_view text);

// Whether a value may go into a child's environment as it is: valid UTF-8 without a control
// character (C0, DEL, C1) and at most `max_bytes` long.
[[nodiscard]] bool environment_safe(std::string_view value, std::size_t max_bytes = 1024);

// A line of JSON that nlohmann::json dumped with ensure_ascii off: DEL, C1 controls,
// bidirectional overrides and isolates and U+2028/U+2029 escaped as \uXXXX as well (JSON leaves
// them raw, and a terminal or a JavaScript reader acts on them). Only inside strings can they
// occur.
[[nodiscard]] std::string json_line_escaped(std::string dumped);

}  // namespace warren::cli
