#include "commands.hpp"

namespace warren::cli {

void add_common_options(CLI::App& command, Common& common) {
  command
      .add_option("--url", common.urls,
                  "amqp[s]://user:pass@host[:port][,host[:port]...][/vhost][?params]; may be given more than once, "
                  "tried in order (default " + std::string(default_url) + ")")
      ->type_name("URL");
  command.add_option("--driver", common.driver, "the event loop: uv or asio")
      ->check(CLI::IsMember({"uv", "asio"}))
      ->default_str("uv");
}

}  // namespace warren::cli
