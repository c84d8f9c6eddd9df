// Every Asio channel verb with its options written inline in the `co_await`, as a newcomer
// writes them: braced options, inline `.arguments` lists, a temporary string as a name. GCC 12
// copied such a temporary bitwise and destroyed it twice while the options owned strings (the
// program aborted in free()), and rejected an inline argument list ("array used as
// initializer"). scripts/test.sh builds this against the installed package with g++ and
// clang++-14 (-Wall -Wextra -Werror) and runs it against the broker; it says what failed and
// exits 1 on any step that does not do what it should. Usage: asio_inline_forms URL
#include <asio/co_spawn.hpp>
#include <asio/use_awaitable.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <warren/asio/async.hpp>

using namespace warren;
using asio::use_awaitable;

namespace {

// value() throws BadResultAccess with the whole Error; `expect` fails a step that completed
// but did not do what it should.
void expect(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("unexpected: ") + what);
}

asio::awaitable<void> all_inline(asio_driver::AsioDriver& driver, client::ConnectionUrl url) {
  const std::string prefix = "warren-inline-" + std::to_string(std::rand() % 100000) + "-a-name-longer-than-sso";
  // ClientOptions inline too, owning strings once copied (GCC 12 aborted in free() here).
  auto conn = (co_await asio_driver::async_connect(
                   driver, url, {.engine = {.connection_name = prefix + "-connection", .heartbeat_s = 30}}, use_awaitable))
                  .value();
  auto ch = (co_await asio_driver::async_open_channel(*conn, use_awaitable)).value();
  (co_await ch.confirm_select(use_awaitable)).value();
  (co_await ch.exchange_declare({.name = prefix + ".x", .type = "topic", .auto_delete = true,
                                 .arguments = {{"alternate-exchange", "amq.fanout"}}}, use_awaitable)).value();
  (co_await ch.exchange_declare({.name = prefix + ".y", .type = "fanout", .auto_delete = true}, use_awaitable)).value();
  (co_await ch.exchange_bind({.destination = prefix + ".y", .source = prefix + ".x", .routing_key = "#"}, use_awaitable)).value();
  auto quorum = (co_await ch.queue_declare({.name = prefix + ".q", .durable = true,
                                            .arguments = {{"x-queue-type", "quorum"}, {"x-delivery-limit", 5}}},
                                           use_awaitable)).value();
  expect(quorum.name == prefix + ".q", "the quorum queue's name");
  // Redeclared with other arguments: 406 names what differs, and only this channel closes.
  auto refused = co_await ch.queue_declare({.name = prefix + ".q", .durable = true,
                                            .arguments = {{"x-queue-type", "classic"}}}, use_awaitable);
  expect(!refused && refused.error().reply_code == 406, "406 for a redeclare with other arguments");
  ch = (co_await asio_driver::async_open_channel(*conn, use_awaitable)).value();
  (co_await ch.confirm_select(use_awaitable)).value();
  (co_await ch.queue_bind({.queue = prefix + ".q", .exchange = prefix + ".y"}, use_awaitable)).value();
  (co_await ch.publish({.exchange = prefix + ".x", .routing_key = "a.b"}, client::as_bytes("routed"), use_awaitable)).value();
  auto got = (co_await ch.get({.queue = prefix + ".q"}, use_awaitable)).value();
  expect(got && got->body_text() == "routed", "get returns what was published through both exchanges");
  got->ack().value();
  (co_await ch.publish({.routing_key = prefix + ".q"}, "consumed", use_awaitable)).value();
  auto consumer = (co_await ch.consume({.queue = prefix + ".q", .tag = prefix + ".tag",
                                        .arguments = {{"x-priority", 5}}}, use_awaitable)).value();
  auto message = (co_await consumer.receive(use_awaitable)).value();
  expect(message.body_text() == "consumed", "the consumer receives the message");
  message.ack().value();
  (co_await consumer.cancel(use_awaitable)).value();
  (co_await ch.publish({.routing_key = prefix + ".q"}, std::string("purged"), use_awaitable)).value();
  expect((co_await ch.queue_purge({.queue = prefix + ".q"}, use_awaitable)).value() == 1, "purge counts one message");
  (co_await ch.queue_unbind({.queue = prefix + ".q", .exchange = prefix + ".y"}, use_awaitable)).value();
  (co_await ch.exchange_unbind({.destination = prefix + ".y", .source = prefix + ".x", .routing_key = "#"}, use_awaitable)).value();
  (co_await ch.queue_delete({.queue = prefix + ".q"}, use_awaitable)).value();
  (co_await ch.exchange_delete({.name = prefix + ".x"}, use_awaitable)).value();
  (co_await ch.exchange_delete({.name = prefix + ".y"}, use_awaitable)).value();
  (co_await asio_driver::async_close(*conn, use_awaitable)).value();
  std::printf("every verb with inline options: ok\n");
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) return std::fprintf(stderr, "usage: asio_inline_forms URL\n"), 2;
  std::srand(static_cast<unsigned>(std::time(nullptr)));
  asio::io_context io;
  asio_driver::AsioDriver driver(io);
  auto url = client::parse_url(argv[1]).value();
  asio::co_spawn(io, all_inline(driver, url), [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run();
} catch (const std::exception& e) {
  return std::fprintf(stderr, "asio_inline_forms: %s\n", e.what()), 1;
}
