// The judge of --metrics-listen's request heads (tools/warren/metrics_request.hpp): its bounds
// at their edges, and that a head cut anywhere is "incomplete" until its last byte, never a
// wrong answer early (the endpoint judges after every read, whatever the client's split).
#include <gtest/gtest.h>

#include <string>

#include "metrics_request.hpp"

using namespace warren::cli::metrics_request;

namespace {

std::string with_headers(std::size_t lines) {
  std::string head = "GET /metrics HTTP/1.1\r\n";
  for (std::size_t i = 0; i < lines; ++i) head += "A: b\r\n";
  return head + "\r\n";
}

}  // namespace

TEST(MetricsRequest, GetAndHeadOfMetricsAreServedAndHeadHasNoBody) {
  EXPECT_EQ(judge("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").answer, Answer::metrics);
  EXPECT_FALSE(judge("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").head);
  EXPECT_EQ(judge("GET /metrics?x=1 HTTP/1.0\r\n\r\n").answer, Answer::metrics);
  EXPECT_EQ(judge("GET /metrics HTTP/1.1\n\n").answer, Answer::metrics);  // bare LF lines
  const auto head = judge("HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.answer, Answer::metrics);
  EXPECT_TRUE(head.head);
}

TEST(MetricsRequest, OtherMethodsPathsAndLinesAreRefusedAsSoonAsTheRequestLineIsIn) {
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "get"})
    EXPECT_EQ(judge(std::string(method) + " /metrics HTTP/1.1\r\n").answer, Answer::method_not_allowed) << method;
  EXPECT_EQ(judge("GET / HTTP/1.1\r\n").answer, Answer::not_found);
  EXPECT_EQ(judge("GET /metricsx HTTP/1.1\r\n").answer, Answer::not_found);
  EXPECT_TRUE(judge("HEAD /x HTTP/1.1\r\n").head);
  for (const char* line : {"GET /metrics\r\n", "GET  /metrics HTTP/1.1\r\n", "GET /metrics HTTP/2.0\r\n",
                           " GET /metrics HTTP/1.1\r\n", "GET /metrics HTTP/1.1 x\r\n", "\r\n"})
    EXPECT_EQ(judge(line).answer, Answer::bad_request) << line;
}

TEST(MetricsRequest, SixtyFourHeaderLinesAreARequestAndSixtyFiveAreTooMany) {
  EXPECT_EQ(judge(with_headers(max_header_lines)).answer, Answer::metrics);
  EXPECT_EQ(judge(with_headers(max_header_lines + 1)).answer, Answer::too_large);
  // Without waiting for the blank line that would end them.
  auto open = with_headers(max_header_lines + 1);
  open.resize(open.size() - 2);
  EXPECT_EQ(judge(open).answer, Answer::too_large);
}

TEST(MetricsRequest, EightKibibytesBoundTheHead) {
  std::string head = "GET /metrics HTTP/1.1\r\nX: ";
  head += std::string(max_head_bytes - head.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(head.size(), max_head_bytes);
  EXPECT_EQ(judge(head).answer, Answer::metrics);
  // One byte more and the blank line is past the bound: too large, even with it received.
  head.insert(30, "a");
  EXPECT_EQ(judge(head).answer, Answer::too_large);
  EXPECT_EQ(judge(head.substr(0, max_head_bytes)).answer, Answer::too_large);
  // A request line with no end within the bound.
  EXPECT_EQ(judge("GET /" + std::string(max_head_bytes, 'a')).answer, Answer::uri_too_long);
  EXPECT_EQ(judge("GET /" + std::string(max_head_bytes - 6, 'a')).answer, Answer::incomplete);
}

TEST(MetricsRequest, AHeadCutAnywhereIsIncompleteUntilItsLastByte) {
  const std::string heads[] = {"GET /metrics HTTP/1.1\r\nHost: x\r\nRange: bytes=0-,0-\r\n\r\n",
                               "HEAD /metrics HTTP/1.0\n\n", with_headers(max_header_lines)};
  for (const auto& head : heads) {
    for (std::size_t cut = 0; cut < head.size(); ++cut)
      EXPECT_EQ(judge(std::string_view(head).substr(0, cut)).answer, Answer::incomplete) << head << " cut at " << cut;
    EXPECT_EQ(judge(head).answer, Answer::metrics) << head;
  }
}
