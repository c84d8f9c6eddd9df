// warren: the command line. Publish, consume, declare, bind, delete, request/reply and a
// PerfTest-style load tool, on either driver. docs/warren-cli.md is its manual page.
#include <cstdio>

#include "commands.hpp"
#include "stop_signals.hpp"

int main(int argc, char** argv) {
  warren::cli::stop_signals::start();  // before any thread exists
  CLI::App app{"warren: a RabbitMQ (AMQP 0-9-1) client on the command line", "warren"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "warren 0.1.0");
  warren::cli::Runner run;
  warren::cli::add_publish(app, run);
  warren::cli::add_consume(app, run);
  warren::cli::add_topology(app, run);
  warren::cli::add_rpc(app, run);
  warren::cli::add_perf(app, run);
  warren::cli::add_pipe(app, run);
  warren::cli::add_work(app, run);
  warren::cli::add_log(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "warren: %s\n", e.what());
    std::fprintf(stderr, "Run with --help for more information.\n");
    return warren::cli::exit_usage;
  }
  return run ? run() : warren::cli::exit_usage;
}
