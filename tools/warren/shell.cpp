#include "shell.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

extern char** environ;

namespace warren::cli::shell {
namespace {

// The process groups of the commands being waited for. A group leaves the set before its
// leader is reaped, so a kill never reaches a process id the system gave to another.
std::mutex running_mutex;
std::set<pid_t> running;

constexpr std::size_t error_line_kept_bytes = 65536;

struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// The last non-empty line of what a command writes, fed as it comes.
class LastLine {
 public:
  void feed(std::string_view bytes) {
    pending_.append(bytes);
    for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n')) {
      take(pending_.substr(0, nl));
      pending_.erase(0, nl + 1);
    }
    if (pending_.size() > error_line_kept_bytes) pending_.erase(0, pending_.size() - error_line_kept_bytes);
  }
  std::string finish() {
    take(std::move(pending_));
    return std::move(last_);
  }

 private:
  void take(std::string line) {
    while (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) last_ = std::move(line);
  }
  std::string pending_, last_;
};

std::string failure(const char* what, int error) { return std::string(what) + ": " + std::strerror(error); }

}  // namespace

void kill_running() noexcept {
  std::lock_guard lock(running_mutex);
  for (pid_t group : running) ::kill(-group, SIGKILL);
}

void terminate_running() noexcept {
  std::lock_guard lock(running_mutex);
  for (pid_t group : running) ::kill(-group, SIGTERM);
}

Outcome run(const Options& options) {
  // A command that exits without reading its input must not kill warren with SIGPIPE: the
  // signal is blocked on this thread, so the write fails with EPIPE instead.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);

  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [k, v] : options.environment)
      if (entry.starts_with(k + "=")) replaced = true;
    if (!replaced) env_strings.emplace_back(entry);
  }
  for (const auto& [k, v] : options.environment) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  // Close-on-exec, so a command started by another thread never holds this one's pipes open.
  int in[2], out[2] = {-1, -1}, err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return {.failure = failure("pipe", errno)};
  Fd in_r{in[0]}, in_w{in[1]};
  if (options.capture_output && ::pipe2(out, O_CLOEXEC) != 0) return {.failure = failure("pipe", errno)};
  Fd out_r{out[0]}, out_w{out[1]};
  if (::pipe2(err, O_CLOEXEC) != 0) return {.failure = failure("pipe", errno)};
  Fd err_r{err[0]}, err_w{err[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_r.fd, 0);
  // Not captured: to warren's standard error (before fd 2 becomes the error pipe).
  posix_spawn_file_actions_adddup2(&actions, options.capture_output ? out_w.fd : 2, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, 2);
  // And nothing else: warren's own descriptors are close-on-exec, but a library's may not be
  // (an OpenSSL or libuv descriptor opened without the flag would be inherited).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::string command(options.command);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  int rc;
  {
    std::lock_guard lock(running_mutex);  // listed before a kill_running() can miss it
    rc = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char**>(argv), envp.data());
    if (rc == 0) running.insert(pid);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return {.failure = failure("cannot start /bin/sh", rc)};
  in_r.reset();
  out_w.reset();
  err_w.reset();
  ::fcntl(in_w.fd, F_SETFL, O_NONBLOCK);

  Outcome outcome;
  LastLine last;
  const std::string_view input = options.input;
  std::size_t written = 0;
  if (input.empty()) in_w.reset();
  // The outcome is the shell's exit, not the end of its output: a command that leaves a child
  // behind holding the pipes (`sleep 60 &`, a daemon that setsid()s) must not keep warren
  // waiting. The pidfd is readable once the shell has exited. (Without pidfd_open, before
  // Linux 5.3, the pipes' end is waited for as before.)
  Fd exited{static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))};
  char buf[65536];
  auto take = [&](const Fd& from, std::string_view bytes) {
    if (&from == &out_r) {
      outcome.output.append(bytes);
    } else {
      if (options.echo_errors) (void)!::write(2, bytes.data(), bytes.size());
      last.feed(bytes);
    }
  };
  bool shell_exited = false;
  while (!shell_exited && (out_r.fd >= 0 || err_r.fd >= 0 || exited.fd >= 0)) {
    pollfd fds[4];
    int n = 0;
    if (in_w.fd >= 0) fds[n++] = {in_w.fd, POLLOUT, 0};
    if (out_r.fd >= 0) fds[n++] = {out_r.fd, POLLIN, 0};
    if (err_r.fd >= 0) fds[n++] = {err_r.fd, POLLIN, 0};
    if (exited.fd >= 0) fds[n++] = {exited.fd, POLLIN, 0};
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == exited.fd) {
        shell_exited = true;
        continue;
      }
      if (fds[i].fd == in_w.fd) {
        ssize_t w = ::write(in_w.fd, input.data() + written, input.size() - written);
        // A command that does not read all its input (or exited) ends our writing, not the run.
        if (w < 0 && errno != EAGAIN && errno != EINTR) in_w.reset();
        else if (w > 0 && (written += static_cast<std::size_t>(w)) == input.size()) in_w.reset();
        continue;
      }
      Fd& from = fds[i].fd == out_r.fd ? out_r : err_r;
      ssize_t r = ::read(from.fd, buf, sizeof buf);
      if (r > 0) take(from, std::string_view(buf, static_cast<std::size_t>(r)));
      else if (r == 0 || (errno != EAGAIN && errno != EINTR)) from.reset();
    }
  }
  if (shell_exited) {
    // What it wrote before it exited is in the pipes: read that much and no more. Reading
    // until the pipe is empty would wait on a left-behind child that keeps writing (`yes &`),
    // and its end may never come. The child itself is left alone (a command may start
    // something on purpose; it gets SIGPIPE if it writes on); a timeout or a stop still kills
    // the whole group.
    for (Fd* from : {&out_r, &err_r}) {
      if (from->fd < 0) continue;
      ::fcntl(from->fd, F_SETFL, O_NONBLOCK);
      int buffered = 0;
      if (::ioctl(from->fd, FIONREAD, &buffered) != 0) buffered = 0;
      for (auto left = static_cast<std::size_t>(buffered); left > 0;) {
        ssize_t r = ::read(from->fd, buf, std::min(left, sizeof buf));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        take(*from, std::string_view(buf, static_cast<std::size_t>(r)));
        left -= static_cast<std::size_t>(r);
      }
    }
  }
  in_w.reset();
  outcome.last_error_line = last.finish();
  // Waited for without reaping, then taken off the kill list, then reaped.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard lock(running_mutex);
    running.erase(pid);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  outcome.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + outcome.signal;
  return outcome;
}

}  // namespace warren::cli::shell
