// warren rpc serve: answers each request on a queue with its body upper-cased.
// warren rpc call: sends one request over direct reply-to and prints the reply.
#include <iostream>

#include "commands.hpp"
#include "trace_environment.hpp"
#include "untrusted_text.hpp"
#include "warren/client/rpc.hpp"

namespace warren::cli {
namespace {

struct RpcArgs {
  Common common;
  std::string queue;
  std::uint64_t count = 0;  // serve: 0 = until interrupted
  std::string body;
  double timeout_s = 10;
  bool raw = false;  // call: the reply's bytes even on a terminal
};

std::string upper(std::span<const std::byte> bytes) {
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  for (auto& c : text)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return text;
}

class ServeJob final : public Job {
 public:
  explicit ServeJob(std::shared_ptr<RpcArgs> args) : Job(args->common), args_(std::move(args)) {}

 private:
  void start() override {
    ensure_queue(args_->queue, [this](Result<std::uint32_t> declared) {
      if (!declared) return fail("rpc serve " + args_->queue, declared.error());
      server_ = client::RpcServer::start(
          channel_, args_->queue,
          [this](const client::Delivery& request) {
            if (args_->count > 0 && ++answered_ == args_->count) driver().post([this] { finish(); });
            return upper(request.body());
          },
          [this](Result<void> r) {
            if (!r) return fail("rpc serve " + args_->queue, r.error());
            std::cout << "serving " << args_->queue << std::endl;  // scripts wait for this line
          });
      server_->on_ended = [this](const Error& cause) { fail("rpc serve " + args_->queue, cause); };
    });
  }

  std::shared_ptr<RpcArgs> args_;
  std::shared_ptr<client::RpcServer> server_;
  std::uint64_t answered_ = 0;
};

class CallJob final : public Job {
 public:
  explicit CallJob(std::shared_ptr<RpcArgs> args) : Job(args->common), args_(std::move(args)) {}

 private:
  Result<void> validate() override { return check_timeout_seconds(args_->timeout_s); }

  void start() override {
    rpc_ = client::RpcClient::start(channel_, [this](Result<void> r) {
      if (!r) return fail("rpc call " + args_->queue, r.error());
      rpc_->call({.routing_key = args_->queue,
                  .timeout = from_seconds(args_->timeout_s),
                  .trace = trace_from_environment().value_or(client::TraceContext{})},
                 client::as_bytes(args_->body),
                 [this](Result<client::Message> reply) {
                   if (!reply) {
                     const Error& e = reply.error();
                     if (e.code == make_error_code(errc::timeout))
                       return fail_text("rpc call " + args_->queue,
                                        "timed out: no reply within " + seconds_text(args_->timeout_s) + " s");
                     if (e.reply_code == 312) return fail_text("rpc call " + args_->queue, returned_line(e), e);
                     return fail("rpc call " + args_->queue, e);
                   }
                   std::cout << shown_body(reply->body_text(), args_->raw) << std::endl;
                   finish();
                 });
    });
  }

  std::shared_ptr<RpcArgs> args_;
  std::shared_ptr<client::RpcClient> rpc_;
};

}  // namespace

void add_rpc(CLI::App& app, Runner& run) {
  auto* rpc = app.add_subcommand("rpc", "request/reply over direct reply-to");
  rpc->require_subcommand(1);
  {
    auto args = std::make_shared<RpcArgs>();
    auto* cmd = rpc->add_subcommand("serve", "answer requests on a queue with the body upper-cased");
    add_common_options(*cmd, args->common);
    cmd->add_option("--queue", args->queue, "the request queue (declared non-durable if missing)")->required();
    cmd->add_option("--count", args->count, "exit 0 after answering this many requests (default: no limit)");
    cmd->callback([&run, args] { run = [args] { return ServeJob(args).run(); }; });
  }
  {
    auto args = std::make_shared<RpcArgs>();
    auto* cmd = rpc->add_subcommand("call", "send one request and print the reply");
    add_common_options(*cmd, args->common);
    cmd->add_option("--queue", args->queue, "the request queue")->required();
    cmd->add_option("--body", args->body, "the request")->required();
    cmd->add_option("--timeout", args->timeout_s, "seconds to wait for the reply (default 10)");
    cmd->add_flag("--raw", args->raw, "write the reply's bytes as they are, even on a terminal (where they are escaped)");
    cmd->callback([&run, args] { run = [args] { return CallJob(args).run(); }; });
  }
}

}  // namespace warren::cli
