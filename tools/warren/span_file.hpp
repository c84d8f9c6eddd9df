// A command's own span, handed back to warren pipe: the stage gives its command an empty file
// (WARREN_TRACEPARENT_FILE in its environment, beside TRACEPARENT) and reads it after the
// command exits. A command that started a span of its own under TRACEPARENT writes that span's
// traceparent on the file's first line (and its tracestate on a second, if it has one); the
// output then names the command's span as its parent instead of the stage's. Anything else in
// the file — a malformed line, another trace's id — is not taken: the stage's span stands.
// docs/warren-cli.md, "pipe".
#pragma once

#include <optional>
#include <string>

#include "warren/client/trace_context.hpp"

namespace warren::cli {

class SpanFile {
 public:
  // An empty file in $TMPDIR (else /tmp), private to this user; removed when this is dropped.
  // Throws std::runtime_error when it cannot be made.
  SpanFile();
  SpanFile(const SpanFile&) = delete;
  SpanFile& operator=(const SpanFile&) = delete;
  ~SpanFile();

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  // What the command wrote, if it is a span of `stage`'s trace; its tracestate views
  // `tracestate_out` (the stage's own when the command wrote none).
  [[nodiscard]] std::optional<client::TraceContext> handed_back(const client::TraceContext& stage,
                                                                std::string& tracestate_out) const;

 private:
  std::string path_;
};

}  // namespace warren::cli
