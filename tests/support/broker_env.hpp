// Test helpers for suites that need the broker the test command started: its settings from
// the environment (failing loudly when absent), rabbitmqctl on that node (and a connection's
// id by its name), and reading a file
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

// The broker's id (pid) for the connection whose client-provided name is `name`, or "": what
// `rabbitmqctl close_connection` takes.
inline std::string connection_pid(const std::string& name) {
  const std::string listing = rabbitmqctl("-q list_connections pid client_properties");
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"" + name + "\"") != std::string::npos || line.find("<<\"" + name + "\">>") != std::string::npos)
      return line.substr(0, line.find('\t'));
  return "";
}

inline std::string file_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace warren::test
