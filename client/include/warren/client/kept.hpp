// An options struct with its own copy of every string and table it names, for a verb that is
// started later than the call that wrote it: an Asio token's initiation (a deferred token, a
// call from another thread handed to the loop), a layer that redeclares what it declared once.
// The options themselves are views (see options.hpp); copies of a Kept share one immutable
// block, so a Kept is cheap to copy and move and the views in it never dangle nor move.
//
//   client::Kept<client::QueueDeclareOptions> declare({.name = name_built_here});
//   ... later: channel.queue_declare(*declare, done);
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "warren/client/options.hpp"

namespace warren::client {

namespace detail {

// Each view an options struct holds, for Kept to copy: one line per struct.
template <class F> void each_view(ExchangeDeclareOptions& o, F& f) { f(o.name); f(o.type); f(o.arguments); }
template <class F> void each_view(ExchangeDeleteOptions& o, F& f) { f(o.name); }
template <class F> void each_view(ExchangeBindOptions& o, F& f) { f(o.destination); f(o.source); f(o.routing_key); f(o.arguments); }
template <class F> void each_view(QueueDeclareOptions& o, F& f) { f(o.name); f(o.arguments); }
template <class F> void each_view(QueueBindOptions& o, F& f) { f(o.queue); f(o.exchange); f(o.routing_key); f(o.arguments); }
template <class F> void each_view(QueuePurgeOptions& o, F& f) { f(o.queue); }
template <class F> void each_view(QueueDeleteOptions& o, F& f) { f(o.queue); }
template <class F> void each_view(GetOptions& o, F& f) { f(o.queue); }
template <class F> void each_view(ConsumeOptions& o, F& f) { f(o.queue); f(o.tag); f(o.arguments); }
template <class F> void each_view(QosOptions&, F&) {}  // no views: nothing to keep
template <class F> void each_view(FlowOptions&, F&) {}
template <class F> void each_view(RecoverOptions&, F&) {}

}  // namespace detail

template <class Options>
class Kept {
 public:
  Kept(const Options& options) : block_(std::make_shared<const Block>(options)) {}  // NOLINT: a copy, by design

  [[nodiscard]] const Options& operator*() const noexcept { return block_->options; }
  [[nodiscard]] const Options* operator->() const noexcept { return &block_->options; }

 private:
  struct Block {
    explicit Block(const Options& o) : options(o) {
      auto keep = [this](auto& view) { this->rebind(view); };
      detail::each_view(options, keep);
    }
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;

    void rebind(std::string_view& text) { text = strings.emplace_back(text); }
    // Every form is rebound, the empty ones too: an empty borrowed table is still a view of
    // the caller's object, which empty() and contains() would read after it is gone.
    void rebind(Arguments& arguments) {
      arguments = arguments.empty() ? Arguments{} : Arguments(tables.emplace_back(arguments.to_table()));
    }

    Options options;
    std::deque<std::string> strings;  // a deque never moves what it already holds
    std::deque<wire::FieldTable> tables;
  };

  std::shared_ptr<const Block> block_;
};

}  // namespace warren::client
