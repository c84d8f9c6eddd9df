// Standard input, one line at a time, read on a thread of its own and handed to the command's
// loop. Reading it on the loop would hold the loop while a pipe is slow to fill: no heartbeat
// answered (the broker drops the connection), no confirm read, and a line sent only when the
// next one came. Bounded: the reader waits while 1,000 lines are unread. Only "\n" is
// stripped, so "\r" and empty lines stay; a last line without "\n" is a line too. It reads
// the descriptor itself (no stdio buffer), so lines_read() is every line taken from the input,
// for a stop to say how many it read and did not send.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "warren/client/driver.hpp"

namespace warren::cli {

class StdinLines {
 public:
  // `on_more` runs on `driver`'s loop when a line (or the end) came after take() found none.
  StdinLines(client::Driver& driver, std::function<void()> on_more);
  ~StdinLines();  // on the loop's thread; the reader posts nothing from then on
  StdinLines(const StdinLines&) = delete;
  StdinLines& operator=(const StdinLines&) = delete;

  enum class Take { line, later, end };
  // The next line into `line`; or `later` (on_more will run); or the end of the input.
  Take take(std::string& line);
  // Lines taken from standard input so far: handed out by take() or still buffered (the
  // start of a line not ended yet counts as one).
  [[nodiscard]] std::size_t lines_read() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace warren::cli
