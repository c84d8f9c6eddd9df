#include "shell_command.hpp"

#include "shell.hpp"

namespace warren::cli {
namespace {

constexpr std::size_t stderr_kept_bytes = 500;  // of the last line, in the record's error

}  // namespace

std::string run_shell(const std::string& command, std::string_view input,
                      std::vector<std::pair<std::string, std::string>> environment) {
  auto outcome = shell::run({.command = command, .input = input, .environment = std::move(environment), .capture_output = true});
  if (!outcome.failure.empty()) throw CommandFailed(outcome.failure);
  if (outcome.signal == 0 && outcome.exit_status == 0) return std::move(outcome.output);
  std::string tail = std::move(outcome.last_error_line);
  if (tail.size() > stderr_kept_bytes) tail.erase(0, tail.size() - stderr_kept_bytes);
  std::string why = outcome.signal == 0 ? "exit " + std::to_string(outcome.exit_status)
                                        : "killed by signal " + std::to_string(outcome.signal);
  if (!tail.empty()) why += ": " + tail;
  throw CommandFailed(why);
}

void kill_running_commands() noexcept { shell::kill_running(); }

}  // namespace warren::cli
