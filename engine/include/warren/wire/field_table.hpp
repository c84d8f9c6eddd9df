// Field-table codec: validate encoded tables without allocating, decode them into owning
// FieldTables on request, and encode owning tables. A TableRef is what methods and
// properties carry: either bytes the decoder validated, or an application's table to send.
#pragma once

#include <cstddef>
#include <span>

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
    return owned_ ? owned_->empty() : encoded_.empty();
  }
  [[nodiscard]] const FieldTable* owned() const noexcept { return owned_; }
  [[nodiscard]] std::span<const std::byte> encoded() const noexcept { return encoded_; }
  [[nodiscard]] Result<FieldTable> to_table() const;

  // Content size for the encoder (the table was checked when its size was first asked for).
  [[nodiscard]] Result<std::size_t> encoded_size() const {
    if (owned_) return encoded_table_size(*owned_);
    return encoded_.size();
  }
  void encode_content(Writer& out) const {
    if (owned_) encode_table_content(out, *owned_);
    else out.bytes(encoded_);
  }

 private:
  std::span<const std::byte> encoded_;
  const FieldTable* owned_ = nullptr;
};

// Compares what the tables say, whichever form they are in.
[[nodiscard]] bool same_table(const TableRef& a, const TableRef& b);

}  // namespace warren::wire
