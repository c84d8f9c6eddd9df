// How warren runs a command: `/bin/sh -c COMMAND` with bytes on its standard input, for
// `work run --exec` and `pipe --exec` alike. Blocking: called on a thread of its own, never on
// the loop. The command runs in a process group of its own (a kill reaches what the shell
// started too, and a terminal's Ctrl-C reaches warren alone), with an empty signal mask and
// SIGPIPE, SIGTERM and SIGINT at their defaults, whatever warren set. A command that stops
// reading its input early ends the writing, not warren (no SIGPIPE reaches warren).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace warren::cli::shell {

struct Options {
  std::string_view command;
  std::string_view input;
  // Added to warren's environment (replacing a variable of the same name).
  std::vector<std::pair<std::string, std::string>> environment;
  // true: its standard output is collected into Outcome::output; false: it goes to warren's
  // standard error (never among warren's result lines).
  bool capture_output = true;
  // Its standard error is copied to warren's standard error as it comes (it is read either
  // way, for Outcome::last_error_line).
  bool echo_errors = false;
};

struct Outcome {
  int exit_status = 0;          // its exit code, or 128 + the signal that ended it
  int signal = 0;               // the signal that ended it; 0 when it exited
  std::string output;           // its standard output, when captured
  std::string last_error_line;  // the last non-empty line it wrote to standard error
  std::string failure;          // non-empty: it could not be run at all (pipe, spawn)
};

// Blocks until the command ended and its output is read.
[[nodiscard]] Outcome run(const Options& options);

// SIGKILL to every command run() is still waiting for, with their whole process groups: a
// run that ends does not wait for them. Any thread.
void kill_running() noexcept;
// SIGTERM to the same: a stop that gives them a chance to end cleanly. Any thread.
void terminate_running() noexcept;

}  // namespace warren::cli::shell
