// Test helpers for suites that need the broker the test command started: its settings from
// the environment (failing loudly when absent), rabbitmqctl on that node (and what the node
// says of a connection by its name, or closing it), and reading a file
// the broker's start script generated (its CA, the client certificate).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace warren::test {

inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set: run through scripts/test.sh, which starts a broker");
  return v;
}

inline std::uint16_t broker_port() { return static_cast<std::uint16_t>(std::stoi(env("RMQ_PORT"))); }

inline std::string rabbitmqctl(const std::string& args) {
  std::string out;
  FILE* p = ::popen((env("RMQ_CTL") + " -q " + args + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("cannot run rabbitmqctl");
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

// Erlang's text for `s` as a binary (<<"...">>), for an expression handed to rabbitmqctl eval
// in single quotes: a quote in `s` is refused.
inline std::string erlang_binary(const std::string& s) {
  std::string out = "<<\"";
  for (char c : s) {
    if (c == '\'') throw std::invalid_argument("erlang_binary: a single quote in " + s);
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\">>";
}

// An Erlang list of `each` (an expression of I, the connection's info: pid, channels,
// client_properties) over the node's connections whose client-provided name is `name`. The
// helpers below evaluate it on the node with rabbitmqctl eval, which scripts/node-ctl.sh
// answers in ~60 ms; the CLI's own list_connections and close_connection boot a VM each
// (~0.9 s of CPU a call), and the suites poll.
inline std::string connections_named(const std::string& name, const std::string& each) {
  return "[" + each +
         " || I <- rabbit_networking:connection_info_all([pid, channels, client_properties]), "
         "lists:member({<<\"connection_name\">>, longstr, " +
         erlang_binary(name) + "}, proplists:get_value(client_properties, I))]";
}

// What rabbitmqctl eval printed, as a number; a failure (an error, an unreachable node) throws.
inline int eval_count(const std::string& expression) {
  const std::string said = rabbitmqctl("eval '" + expression + ".'");
  std::size_t used = 0;
  int n = -2;
  try {
    n = std::stoi(said, &used);
  } catch (const std::exception&) {
  }
  if (n < -1 || said.find_first_not_of("\n", used) != std::string::npos)
    throw std::runtime_error("rabbitmqctl eval " + expression + ": " + said);
  return n;
}

// The channels the broker counts on the connection named `name`; -1 when it has none so named.
inline int broker_channels_of(const std::string& name) {
  return eval_count("case " + connections_named(name, "proplists:get_value(channels, I)") +
                    " of [N | _] -> N; [] -> -1 end");
}

// Closes the connections named `name` as `rabbitmqctl close_connection` does (the client reads
// "CONNECTION_FORCED - " and `reason`); how many there were.
inline int close_connections_named(const std::string& name, const std::string& reason) {
  return eval_count("length(" +
                    connections_named(name, "rabbit_networking:close_connection(proplists:get_value(pid, I), " +
                                                erlang_binary(reason) + ")") +
                    ")");
}

inline std::string file_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace warren::test
