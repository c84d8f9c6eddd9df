#include "stdin_lines.hpp"

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace warren::cli {

namespace {
constexpr std::size_t max_buffered = 1000;
constexpr std::size_t read_bytes = 65536;
}

struct StdinLines::State {
  std::mutex mutex;
  std::condition_variable room;
  std::deque<std::string> lines;
  std::string partial;                 // read, not ended by "\n" yet
  std::size_t taken = 0;               // lines handed out by take()
  bool ended = false;
  bool waiting = false;                // take() found nothing: the next line or the end posts on_more
  client::Driver* driver = nullptr;    // null once the StdinLines is gone
  std::function<void()> on_more;       // touched on the loop's thread only
};

StdinLines::StdinLines(client::Driver& driver, std::function<void()> on_more) : state_(std::make_shared<State>()) {
  state_->driver = &driver;
  state_->on_more = std::move(on_more);
  // Detached: a read of a terminal or a pipe cannot be interrupted portably, and the process
  // ends with it blocked there when the command ends before its input does (a stop, a failure).
  std::thread([s = state_] {
    std::string chunk(read_bytes, '\0');
    for (;;) {
      const ssize_t n = ::read(0, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      std::unique_lock lock(s->mutex);
      const std::size_t before = s->lines.size();
      if (n > 0) {
        std::string_view bytes(chunk.data(), static_cast<std::size_t>(n));
        for (auto nl = bytes.find('\n'); nl != std::string_view::npos; nl = bytes.find('\n')) {
          s->partial.append(bytes.substr(0, nl));
          s->lines.push_back(std::move(s->partial));
          s->partial.clear();
          bytes.remove_prefix(nl + 1);
        }
        s->partial.append(bytes);
      } else {  // the end (or an error reading, which ends the input the same way)
        if (!s->partial.empty()) s->lines.push_back(std::move(s->partial));
        s->partial.clear();
        s->ended = true;
      }
      if (!s->driver) return;
      if (s->waiting && (s->lines.size() > before || s->ended)) {
        s->waiting = false;
        s->driver->post([s] {
          auto on_more = s->on_more;  // a copy: what it runs may end the StdinLines
          if (on_more) on_more();
        });
      }
      if (s->ended) return;
      s->room.wait(lock, [&] { return s->lines.size() < max_buffered || !s->driver; });
      if (!s->driver) return;
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
    ++state_->taken;
    state_->room.notify_one();
    return Take::line;
  }
  if (state_->ended) return Take::end;
  state_->waiting = true;
  return Take::later;
}

std::size_t StdinLines::lines_read() const {
  std::lock_guard lock(state_->mutex);
  return state_->taken + state_->lines.size() + (state_->partial.empty() ? 0 : 1);
}

}  // namespace warren::cli
