// Field-table codec: validate encoded tables without allocating, decode them into owning
// FieldTables on request, and encode owning tables. A TableRef is what methods and
// properties carry: either bytes the decoder validated, or an application's table to send.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "warren/result.hpp"
#include "warren/wire/byte_io.hpp"
#include "warren/wire/field_value.hpp"

namespace warren::wire {

// Checks a table's content (the bytes after its length prefix): every key and value within
// bounds, every tag known, nesting at most max_table_depth. Allocates nothing.
[[nodiscard]] Result<void> validate_table(std::span<const std::byte> content);
// The same checks at any depth (iteratively, so the nesting cannot exhaust the stack), without
// the depth limit: for a message's headers, which are kept as bytes when well-formed but too
// deep to decode (decode_table, and so TableRef::to_table, then refuses them with
// table_too_deep), rather than failing the frame and with it the connection.
[[nodiscard]] Result<void> validate_table_bounds(std::span<const std::byte> content);
[[nodiscard]] Result<FieldTable> decode_table(std::span<const std::byte> content);

// Size of the table's content in bytes; refuses keys over 255 bytes, strings over 4 GiB and
// nesting deeper than max_table_depth, so encode_table_content can then write unchecked.
[[nodiscard]] Result<std::size_t> encoded_table_size(const FieldTable& table);
void encode_table_content(Writer& out, const FieldTable& table);

// One top-level entry of a table's bytes: its key, and its value's bytes, type tag first.
struct TableEntry {
  std::string_view key{};
  std::span<const std::byte> value{};
};

// Walks a table's top-level entries without decoding their values (a nested table or array is
// stepped over whole). For bytes validated already; on bytes that stop making sense it stops.
class TableCursor {
 public:
  explicit TableCursor(std::span<const std::byte> content) noexcept : in_(content) {}
  [[nodiscard]] std::optional<TableEntry> next();

 private:
  Reader in_;
};

// The value of `key` if it is a long string ('S'), from a table's bytes, decoding nothing else:
// how a delivery's trace context is read without decoding its headers.
[[nodiscard]] std::optional<std::string_view> find_long_string(std::span<const std::byte> content, std::string_view key);

// A long-string entry a TableRef writes after the table's own entries, in place of any entry
// of the same key: a message's trace context (traceparent, tracestate) on its headers. An
// empty value writes nothing and still removes the key (a new trace drops an old tracestate).
struct StringEntry {
  std::string_view key{};
  std::string_view value{};
};

class TableRef {
 public:
  TableRef() = default;
  TableRef(const FieldTable& table) noexcept : owned_(&table) {}  // NOLINT: borrowed, not copied

  // Bytes already validated with validate_table (the decoder's output), or, for a message's
  // headers, with validate_table_bounds: then to_table() may refuse them as too deep.
  [[nodiscard]] static TableRef validated(std::span<const std::byte> content) noexcept {
    TableRef ref;
    ref.encoded_ = content;
    return ref;
  }

  [[nodiscard]] bool empty() const noexcept {
    return (owned_ ? owned_->empty() : encoded_.empty()) && replacing_.empty();
  }
  // This table with `entries` written after its own, in place of its entries of the same keys
  // (they are skipped). The entries are viewed: they must outlive every use of the result (a
  // publish encodes before it returns).
  [[nodiscard]] TableRef replacing(std::span<const StringEntry> entries) const noexcept {
    TableRef ref = *this;
    ref.replacing_ = entries;
    return ref;
  }
  [[nodiscard]] const FieldTable* owned() const noexcept { return owned_; }
  [[nodiscard]] std::span<const std::byte> encoded() const noexcept { return encoded_; }
  [[nodiscard]] Result<FieldTable> to_table() const;

  // Content size for the encoder (the table was checked when its size was first asked for).
  [[nodiscard]] Result<std::size_t> encoded_size() const;
  void encode_content(Writer& out) const;

 private:
  std::span<const std::byte> encoded_;
  const FieldTable* owned_ = nullptr;
  std::span<const StringEntry> replacing_{};
};

// Compares what the tables say, whichever form they are in.
[[nodiscard]] bool same_table(const TableRef& a, const TableRef& b);

}  // namespace warren::wire
