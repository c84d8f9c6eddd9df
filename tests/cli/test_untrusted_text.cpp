// What warren shows of another party's text (untrusted_text.hpp): escaped for a terminal, one
// field of a result line, safe for a child's environment, a JSON line; and a tracestate checked
// by the W3C grammar before a command is handed it.
#include <gtest/gtest.h>

#include <string>

#include "untrusted_text.hpp"
#include "warren/client/trace_context.hpp"

using namespace warren::cli;

TEST(TerminalText, WhatATerminalActsOnIsEscapedAndTheRestKept) {
  EXPECT_EQ(escaped_for_terminal("plain text, tab\there, héllo ✓"), "plain text, tab\there, héllo ✓");
  EXPECT_EQ(escaped_for_terminal("\x1b]0;title\x07\x1b[2J"), "\\e]0;title\\x07\\e[2J");
  EXPECT_EQ(escaped_for_terminal("a\nb\rc\x7f\x01"), "a\\nb\\rc\\x7f\\x01");
  EXPECT_EQ(escaped_for_terminal("\xc2\x85\xc2\x9b" "31m"), "\\u0085\\u009b31m");        // C1 as UTF-8
  EXPECT_EQ(escaped_for_terminal("\x9b" "31m\xff"), "\\x9b31m\\xff");                     // bytes that are not UTF-8
  EXPECT_EQ(escaped_for_terminal("\xe2\x80\xae" "evil\xe2\x81\xa6\xe2\x80\xa8"), "\\u202eevil\\u2066\\u2028");
  EXPECT_EQ(escaped_for_terminal("\xe2\x80\x8fok"), "\xe2\x80\x8fok");  // a right-to-left mark reorders nothing
  EXPECT_EQ(escaped_for_terminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");   // a surrogate is not UTF-8
  EXPECT_EQ(escaped_for_terminal("cut \xe2\x80"), "cut \\xe2\\x80");
}

TEST(LineField, PlainIdsStayAsTheyAreAndAnythingElseIsQuoted) {
  EXPECT_EQ(line_field("6f1c2b8e-1a2b-4c3d-9e8f-0a1b2c3d4e5f"), "6f1c2b8e-1a2b-4c3d-9e8f-0a1b2c3d4e5f");
  EXPECT_EQ(line_field("order:42/eu"), "order:42/eu");
  EXPECT_EQ(line_field("x\ndone forged attempt=1"), "\"x\\ndone forged attempt=1\"");
  EXPECT_EQ(line_field("a b"), "\"a b\"");
  EXPECT_EQ(line_field("say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
  EXPECT_EQ(line_field("é\t\x1b"), "\"\\xc3\\xa9\\t\\x1b\"");
  EXPECT_EQ(line_field(""), "\"\"");
}

TEST(Environment, OnlyTextWithoutControlsAndShortEnough) {
  EXPECT_TRUE(environment_safe("an-id 42, héllo"));
  EXPECT_TRUE(environment_safe(""));
  EXPECT_FALSE(environment_safe("a\nb"));
  EXPECT_FALSE(environment_safe("a\x7f"));
  EXPECT_FALSE(environment_safe("\xc2\x85"));
  EXPECT_FALSE(environment_safe("\xff"));
  EXPECT_FALSE(environment_safe(std::string(256, 'a'), 255));
  EXPECT_TRUE(environment_safe(std::string(255, 'a'), 255));
}

TEST(JsonLine, WhatJsonLeavesRawIsEscapedOnlyThere) {
  EXPECT_EQ(json_line_escaped(R"({"body":"é ✓ )" "\xc2\x85\xe2\x80\xae\xe2\x80\xa9" R"("})"),
            R"({"body":"é ✓ \u0085\u202e\u2029"})");
  EXPECT_EQ(json_line_escaped(R"({"a":[1,"b)" "\x7f" R"("]})"), R"({"a":[1,"b\u007f"]})");
}

TEST(Tracestate, TheW3CGrammarAndLimits) {
  using warren::client::valid_tracestate;
  EXPECT_TRUE(valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
  EXPECT_TRUE(valid_tracestate("tenant1@system=v, vendor_2-*/=a b c ,"));
  EXPECT_TRUE(valid_tracestate(""));
  EXPECT_FALSE(valid_tracestate("a=b\n$(touch /tmp/x)"));
  EXPECT_FALSE(valid_tracestate("Upper=v"));
  EXPECT_FALSE(valid_tracestate("k=v=w"));
  EXPECT_FALSE(valid_tracestate("k="));
  EXPECT_TRUE(valid_tracestate("k=trailing "));  // a space after a member is whitespace around it, allowed
  EXPECT_FALSE(valid_tracestate("k=a\x7f"));
  EXPECT_FALSE(valid_tracestate("k=\xc3\xa9"));
  EXPECT_FALSE(valid_tracestate("1k=v"));
  EXPECT_TRUE(valid_tracestate("1k@sys=v"));
  EXPECT_FALSE(valid_tracestate("k@15chars_system=v"));
  std::string members;
  for (int i = 0; i < 32; ++i) members += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_TRUE(valid_tracestate(members));
  EXPECT_FALSE(valid_tracestate(members + ",k32=v"));
  EXPECT_FALSE(valid_tracestate("k=" + std::string(511, 'v')));
  EXPECT_TRUE(valid_tracestate("k=" + std::string(256, 'v')));
  EXPECT_FALSE(valid_tracestate("k=" + std::string(257, 'v')));
}
