// The layer simulation's settling applications (tests/sim/layers.hpp): group members, inboxes
// and backplane instances on the two Sessions' Messaging layers, and an RpcServer with its
// RpcClient on a plain connection of their own (port 5004). Each application settles what it
// is handed as its mode says, switched at random: it leaves it to the layer, keeps a copy(),
// take()s it and settles it later, or acks, nacks (once) or rejects the view itself. The
// checks are the settles, stalls and trace invariants of layers.hpp: every delivery settled
// once, every subscription's queue empty with nothing unacked at the end (nothing stops at a
// prefetch), every confirmed send handed to an application, every trace id kept.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client/fake_driver.hpp"
#include "sim/ledger.hpp"
#include "sim/traces.hpp"
#include "warren/client/rpc.hpp"
#include "warren/messaging/backplane.hpp"
#include "warren/messaging/direct.hpp"

namespace warren::layersim {

class DirectSim {
 public:
  static constexpr std::uint16_t rpc_port = 5004;
  using LayerOf = std::function<std::shared_ptr<messaging::Messaging>(int side)>;
  DirectSim(test::FakeDriver& driver, test::BrokerWorld& world, Ledger& ledger, Traces& traces, LayerOf layer_of,
            std::shared_ptr<client::Observer> observer);
  ~DirectSim();

  void member(int side, int prefetch);  // a member of the group "billing"
  void inbox(int side);                 // the side's inbox (one each)
  void backplane(int side);             // the side's backplane instance, in the room "lobby"
  void send(int a, int b);              // b % 3: to the group, to side a's inbox, to the room
  void mode(int a, int b);              // application a settles as b % 7 says (Mode)
  void settle_taken(int b);             // the oldest message taken: b % 3 = ack, nack, reject
  void rpc_serve();                     // the RpcServer and the RpcClient, once
  void rpc_call(int a);
  void check();  // after every step
  // At the end: what is taken is settled, every application leaves the settle to its layer,
  // a member is live; then every live subscription's queue is empty with nothing unacked.
  void finish();
  void close();

 private:
  enum Mode { leave, keep_copy, take_later, ack_view, nack_once, reject_view, take_ack, modes };
  struct App {
    std::string who;
    int mode = leave;
    bool live = true;
    std::string queue;  // its queue, once it consumes
    std::shared_ptr<messaging::Subscription> member;
    std::shared_ptr<messaging::Inbox> inbox;
    std::shared_ptr<messaging::Backplane> backplane;
  };
  void handed(App& app, const client::Delivery& d);
  std::shared_ptr<App> app(std::string who);

  test::FakeDriver& driver_;
  test::BrokerWorld& world_;
  Ledger& ledger_;
  Traces& traces_;
  LayerOf layer_of_;
  std::shared_ptr<client::Observer> observer_;
  std::vector<std::shared_ptr<App>> apps_;
  std::shared_ptr<App> inboxes_[2], backplanes_[2], server_app_;
  std::deque<client::Message> taken_, copies_;
  std::map<std::string, int> nacked_, handed_;  // by body
  std::set<std::string> rejected_, to_group_;   // confirmed sends to the group
  int next_send_ = 0, next_call_ = 0, answered_ = 0;
  // The RPC pair.
  std::shared_ptr<client::Connection> rpc_connection_;
  std::shared_ptr<client::RpcServer> server_;
  std::shared_ptr<client::RpcClient> rpc_;
};

}  // namespace warren::layersim
