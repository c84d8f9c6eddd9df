// A command on the messaging layer (work, log): the layer over the job's Session when the
// command recovers (Job::recovers), else over its connection; and closed as the job closes its
// connection, so a resubscribe timer armed during an outage does not hold the loop.
#pragma once

#include "job.hpp"
#include "warren/messaging/messaging.hpp"

namespace warren::cli {

class LayerJob : public Job {
 public:
  using Job::Job;

 protected:
  [[nodiscard]] Result<void> make_layer(messaging::Options options) {
    auto layer = session() ? messaging::Messaging::create(session(), std::move(options))
                           : messaging::Messaging::create(conn_, std::move(options));
    if (!layer) return layer.error();
    layer_ = *layer;
    return {};
  }
  void closing() override {
    if (layer_) layer_->close(nullptr);
  }

  std::shared_ptr<messaging::Messaging> layer_;
};

}  // namespace warren::cli
