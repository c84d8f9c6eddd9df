// A publish and its body copied into one owned buffer. Publish holds views (the
// client copies the frames before publish() returns), but some publishes are sent later than
// the call that wrote them, when the caller's strings and body are gone: an Asio token's
// initiation (experimental::deferred, a call from another thread handed to the loop), an RPC
// call made before its client is ready. The properties are encoded as the
// content header and decoded back, so every property and header points into the buffer.
// May not: keep a view of anything the caller owns.
#pragma once

#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "warren/client/options.hpp"
#include "warren/wire/properties.hpp"

namespace warren::client {

class OwnedPublish {
 public:
  OwnedPublish(const Publish& publish, std::span<const std::byte> body) { assign(publish, body); }
  OwnedPublish(const OwnedPublish& other) : status_(other.status_) {
    if (status_.ok()) assign(other.publish_, other.body_);
  }
  OwnedPublish& operator=(const OwnedPublish&) = delete;
  // A moved vector keeps its heap block, so the views stay valid.
  OwnedPublish(OwnedPublish&&) noexcept = default;
  OwnedPublish& operator=(OwnedPublish&&) = delete;

  // The copy failed when the properties cannot be encoded (a string over 255 bytes, say).
  [[nodiscard]] const Result<void>& status() const noexcept { return status_; }
  [[nodiscard]] const Publish& publish() const noexcept { return publish_; }
  [[nodiscard]] std::span<const std::byte> body() const noexcept { return body_; }

 private:
  void assign(const Publish& p, std::span<const std::byte> body) {
    auto header_size = wire::content_header_size(p.properties);
    if (!header_size.ok()) {
      status_ = std::move(header_size).error();
      return;
    }
    storage_.resize(p.exchange.size() + p.routing_key.size() + p.trace.tracestate.size() + *header_size + body.size());
    std::byte* out = storage_.data();
    auto put = [&out](std::span<const std::byte> bytes) {
      if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
      std::span<const std::byte> copied{out, bytes.size()};
      out += bytes.size();
      return copied;
    };
    auto put_text = [&put](std::string_view s) {
      auto copied = put(std::as_bytes(std::span{s.data(), s.size()}));
      return std::string_view{reinterpret_cast<const char*>(copied.data()), copied.size()};
    };
    publish_ = p;
    publish_.exchange = put_text(p.exchange);
    publish_.routing_key = put_text(p.routing_key);
    publish_.trace.tracestate = put_text(p.trace.tracestate);
    wire::Writer w(out);
    wire::encode_content_header(w, body.size(), p.properties);
    wire::ContentHeader decoded;
    status_ = wire::decode_content_header(std::span<const std::byte>(out, *header_size), decoded);
    publish_.properties = decoded.properties;
    out += *header_size;
    body_ = put(body);
  }

  std::vector<std::byte> storage_;
  Publish publish_;
  std::span<const std::byte> body_;
  Result<void> status_;
};

}  // namespace warren::client
