// warren declare queue|exchange, warren bind, warren delete queue|exchange: one method each,
// answered or refused by the broker. `declare queue` prints the queue's name (the broker's
// name for ""), its message count and its consumer count.
#include <iostream>

#include "commands.hpp"
#include "values.hpp"

namespace warren::cli {
namespace {

struct TopologyArgs {
  Common common;
  std::string what;  // "declare queue", "declare exchange", "bind", "delete queue", "delete exchange"
  std::string name, exchange, routing_key, type;
  bool durable = false, transient = false, exclusive = false, auto_delete = false;
  std::vector<std::string> arguments;
};

class TopologyJob final : public Job {
 public:
  explicit TopologyJob(std::shared_ptr<TopologyArgs> args) : Job(args->common), args_(std::move(args)) {}

 private:
  Result<void> validate() override {
    for (const auto& a : args_->arguments)
      if (auto r = add_typed_entry(arguments_, a, Untyped::infer); !r.ok())
        return make_error(errc::invalid_argument, "--arg " + r.error().detail);
    // The queue type is an argument like any other; --type says it without the x- prefix.
    if (args_->what == "declare queue" && !args_->type.empty()) arguments_.set("x-queue-type", args_->type);
    return {};
  }

  void start() override {
    const auto& a = *args_;
    auto answered = [this](const Result<void>& r) {
      if (!r) return fail(args_->what + " " + args_->name, r.error());
      finish();
    };
    if (a.what == "declare queue") {
      // Durable unless --transient: a transient queue that is not exclusive is refused by
      // RabbitMQ 4.3 by default (docs/compatibility.md).
      channel_.queue_declare({.name = a.name, .durable = !a.transient, .exclusive = a.exclusive,
                              .auto_delete = a.auto_delete, .arguments = arguments_},
                             [this](Result<client::QueueDeclared> q) {
                               if (!q) return fail(args_->what + " " + args_->name, q.error());
                               std::cout << q->name << " messages=" << q->message_count
                                         << " consumers=" << q->consumer_count << std::endl;
                               finish();
                             });
    } else if (a.what == "declare exchange") {
      channel_.exchange_declare({.name = a.name, .type = a.type, .durable = a.durable, .auto_delete = a.auto_delete,
                                 .arguments = arguments_},
                                answered);
    } else if (a.what == "bind") {
      channel_.queue_bind({.queue = a.name, .exchange = a.exchange, .routing_key = a.routing_key, .arguments = arguments_},
                          answered);
    } else if (a.what == "delete queue") {
      channel_.queue_delete({.queue = a.name}, [answered](Result<std::uint32_t> r) {
        answered(r ? Result<void>() : Result<void>(r.error()));
      });
    } else {
      channel_.exchange_delete({.name = a.name}, answered);
    }
  }

  std::shared_ptr<TopologyArgs> args_;
  client::FieldTable arguments_;
};

void set_runner(CLI::App& cmd, Runner& run, std::shared_ptr<TopologyArgs> args, std::string what) {
  cmd.callback([&run, args, what] {
    args->what = what;
    run = [args] { return TopologyJob(args).run(); };
  });
}

}  // namespace

void add_topology(CLI::App& app, Runner& run) {
  auto* declare = app.add_subcommand("declare", "declare a queue or an exchange");
  declare->require_subcommand(1);
  {
    auto args = std::make_shared<TopologyArgs>();
    auto* cmd = declare->add_subcommand("queue", "declare a queue; prints its name, messages and consumers");
    add_common_options(*cmd, args->common);
    cmd->add_option("NAME", args->name, "the queue (\"\" lets the broker name it)")->required();
    cmd->add_option("--type", args->type, "classic, quorum or stream")->check(CLI::IsMember({"classic", "quorum", "stream"}));
    auto* durable = cmd->add_flag("--durable", args->durable, "survives a broker restart (the default)");
    cmd->add_flag("--transient", args->transient,
                  "does not survive a broker restart; RabbitMQ 4.3 refuses it by default unless --exclusive")
        ->excludes(durable);
    cmd->add_flag("--exclusive", args->exclusive, "only this connection may use it; deleted when it closes");
    cmd->add_flag("--auto-delete", args->auto_delete, "deleted when its last consumer goes");
    cmd->add_option("--arg", args->arguments, "K=V (numbers and true/false are read as such), K:int=V, K:string=V, ...")
        ->type_name("K=V");
    set_runner(*cmd, run, args, "declare queue");
  }
  {
    auto args = std::make_shared<TopologyArgs>();
    auto* cmd = declare->add_subcommand("exchange", "declare an exchange");
    add_common_options(*cmd, args->common);
    cmd->add_option("NAME", args->name, "the exchange")->required();
    cmd->add_option("--type", args->type, "direct, fanout, topic or headers")
        ->required()
        ->check(CLI::IsMember({"direct", "fanout", "topic", "headers"}));
    cmd->add_flag("--durable", args->durable, "survives a broker restart");
    set_runner(*cmd, run, args, "declare exchange");
  }
  {
    auto args = std::make_shared<TopologyArgs>();
    auto* cmd = app.add_subcommand("bind", "bind a queue to an exchange");
    add_common_options(*cmd, args->common);
    cmd->add_option("QUEUE", args->name, "the queue")->required();
    cmd->add_option("EXCHANGE", args->exchange, "the exchange")->required();
    cmd->add_option("--routing-key", args->routing_key, "the binding key");
    set_runner(*cmd, run, args, "bind");
  }
  auto* del = app.add_subcommand("delete", "delete a queue or an exchange");
  del->require_subcommand(1);
  for (const char* kind : {"queue", "exchange"}) {
    auto args = std::make_shared<TopologyArgs>();
    auto* cmd = del->add_subcommand(kind, std::string("delete a ") + kind);
    add_common_options(*cmd, args->common);
    cmd->add_option("NAME", args->name, std::string("the ") + kind)->required();
    set_runner(*cmd, run, args, std::string("delete ") + kind);
  }
}

}  // namespace warren::cli
