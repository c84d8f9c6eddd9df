// What --metrics-listen answers to a request head: the bytes a client sent up to its blank line,
// judged within fixed bounds (8 KiB, 64 header lines) so that no client decides how much the
// endpoint holds. Pure: no sockets, no clock, no figures; metrics_endpoint.cpp does the I/O.
// It reads only what it must to answer one document: the method and the path. A header is
// counted, never stored or interpreted, so Range, Expect and a body's length change nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace warren::cli::metrics_request {

// A scraper's request is a few hundred bytes (Prometheus sends about 250); these leave room
// for proxies' headers and bound what a connection can make the endpoint keep.
inline constexpr std::size_t max_head_bytes = 8192;
inline constexpr std::size_t max_header_lines = 64;

enum class Answer : std::uint8_t {
  incomplete,          // no blank line yet, within the bounds: read on
  metrics,             // GET or HEAD /metrics: the figures
  bad_request,         // 400: not an HTTP/1.x request line
  not_found,           // 404: another path
  method_not_allowed,  // 405: not GET or HEAD
  uri_too_long,        // 414: no request line within max_head_bytes
  too_large,           // 431: the head is over max_head_bytes or max_header_lines
};

struct Judgement {
  Answer answer = Answer::incomplete;
  bool head = false;  // HEAD: the answer has no body
};

// `received`: every byte of the connection so far (at most max_head_bytes are ever kept).
// Each call reads it all again: at most 8 KiB per read from the socket, a bounded cost.
[[nodiscard]] Judgement judge(std::string_view received) noexcept;

}  // namespace warren::cli::metrics_request
