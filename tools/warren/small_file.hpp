// A small file read whole: a URL file, a secret. Bounded (reading /dev/zero or a log by
// mistake must end), opened close-on-exec, and its mode read from what was opened, not from
// the name (it cannot change in between). The callers word the errors: each names its option.
#pragma once

#include <cstddef>
#include <string>

namespace warren::cli {

struct SmallFile {
  std::string text;
  bool others_can_read = false;  // a regular file whose mode lets any user read it
  int error = 0;                 // errno of the open or read that failed (EISDIR: a directory)
  bool too_large = false;        // more than the bound: reading stopped there
  [[nodiscard]] bool ok() const noexcept { return error == 0 && !too_large; }
};

[[nodiscard]] SmallFile read_small_file(const std::string& path, std::size_t max_bytes);

}  // namespace warren::cli
