// Runs `/bin/sh -c COMMAND` with bytes on its standard input and collects its standard output
// (warren pipe's --exec). Blocking: called on a worker thread, never on the loop. The child
// gets the default signal dispositions and an empty signal mask, whatever warren set.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace warren::cli {

// A command that exited non-zero, was killed, or could not be started: the record's error.
struct CommandFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The command's standard output; throws CommandFailed ("exit 3: <the end of its stderr>").
[[nodiscard]] std::string run_shell(const std::string& command, std::string_view input);

// Kills (SIGKILL) every command still running, with what it started (each runs in a process
// group of its own): a run that fails does not wait for them.
void kill_running_commands() noexcept;

}  // namespace warren::cli
