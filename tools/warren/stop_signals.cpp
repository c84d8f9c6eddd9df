#include "stop_signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <thread>

namespace warren::cli::stop_signals {
namespace {

std::mutex mutex;
client::Driver* loop = nullptr;
std::function<void(int)> handler;
int pending = 0;  // a signal that came while no handler was set

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

void deliver(int signal) {
  std::lock_guard lock(mutex);
  if (!handler) {
    if (!loop) {
      pending = signal;  // no loop yet: the handler set next takes it
      return;
    }
    die_by(signal);
  }
  loop->post([fn = handler, signal] { fn(signal); });
}

}  // namespace

void start() {
  sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) == 0) deliver(signal);
    }
  }).detach();
}

void set(client::Driver& driver, std::function<void(int)> on_stop) {
  std::lock_guard lock(mutex);
  loop = &driver;
  handler = std::move(on_stop);
  if (pending && handler) loop->post([fn = handler, signal = pending] { fn(signal); });
  else if (pending) die_by(pending);
  pending = 0;
}

void clear() {
  std::lock_guard lock(mutex);
  loop = nullptr;
  handler = nullptr;
}

void die_by(int signal) {
  ::signal(signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(signal);  // to this thread, which no longer blocks it: the default action ends the process
  std::_Exit(128 + signal);
}

}  // namespace warren::cli::stop_signals
