// Cross-check against python3-pika: warren decodes the frames pika encoded to the values pika
// was given, and encodes those values back to pika's exact bytes. Every method warren speaks
// is covered. The vectors come from pika_vectors.py, run with Debian's /usr/bin/python3.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

#include "support/encode.hpp"
#include "support/frames.hpp"

#ifndef PIKA_VECTORS_SCRIPT
#error "PIKA_VECTORS_SCRIPT must name tests/pika/pika_vectors.py"
#endif

namespace warren::wire {
namespace {

using test::from_hex;
using test::to_hex;

struct Vector {
  std::string kind, hex, text;
};

std::vector<Vector> load_vectors() {
  std::string command = std::string("/usr/bin/python3 ") + PIKA_VECTORS_SCRIPT;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) throw std::runtime_error("cannot run " + command);
  std::string all;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe.get())) all.append(buf, n);
  int status = ::pclose(pipe.release());
  if (status != 0) throw std::runtime_error(command + " failed (is python3-pika installed?)");
  std::vector<Vector> out;
  std::istringstream lines(all);
  for (std::string line; std::getline(lines, line);) {
    auto a = line.find('\t'), b = line.find('\t', a + 1);
    out.push_back({line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1)});
  }
  return out;
}

const std::vector<Vector>& vectors() {
  static const std::vector<Vector> v = load_vectors();
  return v;
}

FrameView only_frame(const std::vector<std::byte>& bytes) {
  FrameDecoder d(FrameDecoder::Peer::broker, 0);
  d.feed(bytes);
  auto r = d.next();
  if (!r.ok() || !r->has_value()) throw std::runtime_error("pika's bytes are not one frame");
  return **r;
}

// RabbitMQ's update-secret (10/70, 10/71) is not in Debian 12's pika (1.2.0) spec: pika cannot
// write it, so its byte vectors are hand-written from RabbitMQ's spec (tests/unit/test_methods.cpp).
const std::set<std::size_t>& not_in_pika() {
  static const std::set<std::size_t> methods{Method{ConnectionUpdateSecret{}}.index(), Method{ConnectionUpdateSecretOk{}}.index()};
  return methods;
}

TEST(PikaCrossCheck, VectorsCoverEveryMethod) {
  std::set<std::size_t> seen;
  for (const auto& v : vectors()) {
    if (v.kind != "method") continue;
    auto bytes = from_hex(v.hex);
    auto m = decode_method(only_frame(bytes).payload);
    ASSERT_TRUE(m.ok()) << v.text << ": " << m.error().to_string();
    seen.insert(m->index());
  }
  for (std::size_t i : not_in_pika()) EXPECT_FALSE(seen.contains(i)) << "pika knows method " << i << " now: check it";
  EXPECT_EQ(seen.size(), std::variant_size_v<Method> - not_in_pika().size());
}

TEST(PikaCrossCheck, MethodsReadAsPikaWroteThemAndEncodeToPikasBytes) {
  int checked = 0;
  for (const auto& v : vectors()) {
    if (v.kind != "method") continue;
    SCOPED_TRACE(v.text);
    auto bytes = from_hex(v.hex);
    auto frame = only_frame(bytes);
    auto m = decode_method(frame.payload);
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    EXPECT_EQ(to_string(*m), v.text);
    EXPECT_EQ(to_hex(test::encode_frame(frame.channel, *m, 0)), v.hex);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(std::variant_size_v<Method> - not_in_pika().size()));
}

TEST(PikaCrossCheck, ContentHeadersReadAsPikaWroteThemAndEncodeToPikasBytes) {
  int checked = 0;
  for (const auto& v : vectors()) {
    if (v.kind != "header") continue;
    SCOPED_TRACE(v.text);
    auto bytes = from_hex(v.hex);
    auto frame = only_frame(bytes);
    ASSERT_EQ(frame.type, FrameType::header);
    auto h = decode_content_header(frame.payload);
    ASSERT_TRUE(h.ok()) << h.error().to_string();
    EXPECT_EQ(std::to_string(h->body_size) + " " + to_string(h->properties), v.text);
    // Re-encode into a frame of our own and compare with pika's.
    auto size = content_header_size(h->properties);
    ASSERT_TRUE(size.ok());
    std::vector<std::byte> out(*size + frame_overhead_bytes);
    Writer w(out.data());
    w.u8(static_cast<std::uint8_t>(FrameType::header));
    w.u16(frame.channel);
    w.u32(static_cast<std::uint32_t>(*size));
    encode_content_header(w, h->body_size, h->properties);
    w.u8(0xCE);
    EXPECT_EQ(to_hex(out), v.hex);
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(PikaCrossCheck, BodyFrame) {
  int checked = 0;
  for (const auto& v : vectors()) {
    if (v.kind != "body") continue;
    auto bytes = from_hex(v.hex);
    auto frame = only_frame(bytes);
    ASSERT_EQ(frame.type, FrameType::body);
    EXPECT_EQ(quote({reinterpret_cast<const char*>(frame.payload.data()), frame.payload.size()}), v.text);
    ++checked;
  }
  EXPECT_EQ(checked, 1);
}

}  // namespace
}  // namespace warren::wire
