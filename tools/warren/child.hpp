// `work run`'s command: /bin/sh -c CMD with the body on standard input and extra environment
// variables, waited for on a thread of its own (the loop keeps serving heartbeats meanwhile).
// The command's standard output and error go to warren's standard error, never into the
// result lines on warren's standard output; the last line it wrote to standard error is kept.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace warren::cli {

struct ChildResult {
  int exit_status = 0;  // the exit code, or 128 + the signal that ended it
  std::string last_error_line;
  std::string failure;  // non-empty: the command could not be run at all (fork, pipe)
};

// Blocks until the command ends. The command runs in a process group of its own, so that
// kill_running_shells() reaches it and whatever it started.
[[nodiscard]] ChildResult run_shell(const std::string& command, const std::string& input,
                                    const std::vector<std::pair<std::string, std::string>>& environment);

// SIGKILL to every command run_shell is still waiting for (their whole process groups): a run
// that ends (its --timeout, --count, an error) must not wait for them; their messages were
// never settled, so the broker hands them out again. Any thread.
void kill_running_shells();

}  // namespace warren::cli
