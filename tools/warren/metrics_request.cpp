#include "metrics_request.hpp"

namespace warren::cli::metrics_request {
namespace {

// "GET /metrics HTTP/1.1": what the request line asks for, answered as soon as the line is in
// (a refusal need not wait for headers that would change nothing).
Judgement judge_request_line(std::string_view line) noexcept {
  const auto first = line.find(' ');
  const auto second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (first == 0 || second == std::string_view::npos || line.find(' ', second + 1) != std::string_view::npos)
    return {Answer::bad_request};
  const auto method = line.substr(0, first);
  const auto target = line.substr(first + 1, second - first - 1);
  const auto version = line.substr(second + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return {Answer::bad_request};
  const bool head = method == "HEAD";
  if (method != "GET" && !head) return {Answer::method_not_allowed};
  // A query changes nothing (the document has no parameters); any other path is not ours.
  if (target.substr(0, target.find('?')) != "/metrics") return {Answer::not_found, head};
  return {Answer::incomplete, head};  // ours, once the head has ended
}

}  // namespace

Judgement judge(std::string_view received) noexcept {
  if (received.size() > max_head_bytes) received = received.substr(0, max_head_bytes);
  Judgement asked{};
  std::size_t header_lines = 0;
  bool request_line_seen = false;
  std::size_t start = 0;
  // A lone LF ends a line too: RFC 9112 section 2.2 lets a recipient accept it.
  for (auto end = received.find('\n'); end != std::string_view::npos; end = received.find('\n', start)) {
    auto line = received.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!request_line_seen) {
      request_line_seen = true;
      asked = judge_request_line(line);
      if (asked.answer != Answer::incomplete) return asked;
      continue;
    }
    if (line.empty()) return {Answer::metrics, asked.head};
    if (++header_lines > max_header_lines) return {Answer::too_large, asked.head};
  }
  if (received.size() < max_head_bytes) return {Answer::incomplete, asked.head};
  return {request_line_seen ? Answer::too_large : Answer::uri_too_long, asked.head};
}

}  // namespace warren::cli::metrics_request
