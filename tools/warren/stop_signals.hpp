// SIGTERM and SIGINT as a request to stop, handed to the command's loop. start() blocks both
// in the calling thread before any other thread exists (every thread warren starts inherits
// the mask; the commands it runs get an empty one) and starts one thread that waits for
// them with sigwait, so nothing runs in a signal handler and nothing polls. A command that
// registered no handler dies by the signal as it would have without warren's help.
#pragma once

#include <functional>

#include "warren/client/driver.hpp"

namespace warren::cli::stop_signals {

// Once, first thing in main().
void start();
// `on_stop(signal)` runs on `driver`'s loop when SIGTERM or SIGINT arrives (at once, posted,
// if one came before it was set); a second signal while stopping runs it again.
void set(client::Driver& driver, std::function<void(int signal)> on_stop);
// No handler from now on (the driver is going away): a signal ends the process.
void clear();
// Ends the process by `signal` with its default action (exit status 128 + signal).
[[noreturn]] void die_by(int signal);

}  // namespace warren::cli::stop_signals
