#include "stdin_lines.hpp"

#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

namespace warren::cli {

namespace {
constexpr std::size_t max_buffered = 1000;
}

struct StdinLines::State {
  std::mutex mutex;
  std::condition_variable room;
  std::deque<std::string> lines;
  bool ended = false;
  bool waiting = false;                // take() found nothing: the next line or the end posts on_more
  client::Driver* driver = nullptr;    // null once the StdinLines is gone
  std::function<void()> on_more;       // touched on the loop's thread only
};

StdinLines::StdinLines(client::Driver& driver, std::function<void()> on_more) : state_(std::make_shared<State>()) {
  state_->driver = &driver;
  state_->on_more = std::move(on_more);
  // Detached: a read of a terminal or a pipe cannot be interrupted portably, and the process
  // ends with it blocked there when the command ends before its input does (a failure).
  std::thread([s = state_] {
    for (std::string line;;) {
      const bool got = static_cast<bool>(std::getline(std::cin, line));
      std::unique_lock lock(s->mutex);
      if (got) {
        s->room.wait(lock, [&] { return s->lines.size() < max_buffered || !s->driver; });
        s->lines.push_back(std::move(line));
      } else {
        s->ended = true;
      }
      if (!s->driver) return;
      if (s->waiting) {
        s->waiting = false;
        s->driver->post([s] {
          auto on_more = s->on_more;  // a copy: what it runs may end the StdinLines
          if (on_more) on_more();
        });
      }
      if (!got) return;
    }
  }).detach();
}

StdinLines::~StdinLines() {
  std::lock_guard lock(state_->mutex);
  state_->driver = nullptr;
  state_->on_more = nullptr;
  state_->room.notify_all();
}

StdinLines::Take StdinLines::take(std::string& line) {
  std::lock_guard lock(state_->mutex);
  if (!state_->lines.empty()) {
    line = std::move(state_->lines.front());
    state_->lines.pop_front();
    state_->room.notify_one();
    return Take::line;
  }
  if (state_->ended) return Take::end;
  state_->waiting = true;
  return Take::later;
}

}  // namespace warren::cli
