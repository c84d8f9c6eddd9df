// The subcommands. Each adds itself to the CLI11 app and sets `run` to what the parsed
// command line asks for; main() calls it once parsing succeeded.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "job.hpp"

namespace warren::cli {

using Runner = std::function<int()>;

// --url and --driver, on every subcommand.
void add_common_options(CLI::App& command, Common& common);

void add_publish(CLI::App& app, Runner& run);
void add_consume(CLI::App& app, Runner& run);
void add_topology(CLI::App& app, Runner& run);  // declare, bind, delete
void add_rpc(CLI::App& app, Runner& run);
void add_perf(CLI::App& app, Runner& run);
void add_pipe(CLI::App& app, Runner& run);  // a queue through a command to an exchange
void add_work(CLI::App& app, Runner& run);  // work put, work run
void add_log(CLI::App& app, Runner& run);   // log append, log read

}  // namespace warren::cli
