// One TCP (or TLS over TCP) stream on a libuv loop, for UvDriver::dial. Private to the driver.
//
// The socket is ours, watched with a uv_poll_t, rather than a uv_tcp_t: libuv writes a
// uv_tcp_t with write(2), and writing to a socket whose peer has gone raises SIGPIPE, which
// kills the host process unless the application ignores the signal. send(2) with
// MSG_NOSIGNAL cannot. Owning the socket also lets the dial try every address the name
// resolves to, in order, within the one connect deadline.
#pragma once

#include <uv.h>

#include <memory>
#include <optional>

#include "warren/client/driver.hpp"

namespace warren::uv::detail {

[[nodiscard]] std::unique_ptr<client::Stream> dial_stream(uv_loop_t* loop, const client::Endpoint& endpoint,
                                                          engine::Duration timeout,
                                                          std::optional<client::TlsSettings> tls,
                                                          client::StreamEvents& events);

}  // namespace warren::uv::detail
