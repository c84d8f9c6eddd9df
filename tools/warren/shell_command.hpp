// warren pipe's --exec: `/bin/sh -c COMMAND` through shell.hpp (as work run's), its standard
// output collected, and a failure as the record's error. Blocking: called on a worker thread,
// never on the loop.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace warren::cli {

// A command that exited non-zero, was killed, or could not be started: the record's error.
struct CommandFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The command's standard output; throws CommandFailed ("exit 3: <the end of its stderr>").
// `environment` is added to warren's own.
[[nodiscard]] std::string run_shell(const std::string& command, std::string_view input,
                                    std::vector<std::pair<std::string, std::string>> environment = {});

// Kills (SIGKILL) every command still running, with what it started (each runs in a process
// group of its own): a run that fails does not wait for them.
void kill_running_commands() noexcept;

}  // namespace warren::cli
