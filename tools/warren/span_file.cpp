#include "span_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace warren::cli {

SpanFile::SpanFile() {
  const char* dir = std::getenv("TMPDIR");
  std::string name = std::string(dir && *dir ? dir : "/tmp") + "/warren-span-XXXXXX";
  // mkostemp: 0600, and O_CLOEXEC so the descriptor (closed at once anyway) reaches no child.
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot make a span file in " + name + ": " + std::strerror(errno));
  ::close(fd);
  path_ = std::move(name);
}

SpanFile::~SpanFile() { ::unlink(path_.c_str()); }

std::optional<client::TraceContext> SpanFile::handed_back(const client::TraceContext& stage,
                                                          std::string& tracestate_out) const {
  std::ifstream in(path_);
  std::string parent_line, state_line;
  if (!std::getline(in, parent_line)) return std::nullopt;
  const bool has_state = static_cast<bool>(std::getline(in, state_line));
  auto trim = [](std::string& s) {
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  };
  trim(parent_line);
  trim(state_line);
  auto mine = client::TraceContext::parse(parent_line);
  // Only a span of the stage's own trace: a command cannot move the message to another trace.
  if (!mine || mine->trace_id != stage.trace_id) return std::nullopt;
  tracestate_out = has_state && !state_line.empty() ? state_line : std::string(stage.tracestate);
  mine->tracestate = tracestate_out;
  return mine;
}

}  // namespace warren::cli
