#include "child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

extern char** environ;

namespace warren::cli {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The process groups of the commands being waited for. A group is removed before it is reaped,
// so a kill never reaches a reused process id.
std::mutex running_mutex;
std::set<pid_t> running_groups;

}  // namespace

void kill_running_shells() {
  std::lock_guard lock(running_mutex);
  for (pid_t group : running_groups) ::kill(-group, SIGKILL);
}

ChildResult run_shell(const std::string& command, const std::string& input,
                      const std::vector<std::pair<std::string, std::string>>& environment) {
  ChildResult result;
  // The environment is built before fork: after it only async-signal-safe calls are made.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [k, v] : environment)
      if (entry.starts_with(k + "=")) replaced = true;
    if (!replaced) env_strings.emplace_back(entry);
  }
  for (const auto& [k, v] : environment) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};

  // A command that exits without reading its input must not kill warren with SIGPIPE: the
  // signal is blocked on this thread, so the write fails with EPIPE instead.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  int in[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return {.failure = std::string("pipe: ") + std::strerror(errno)};
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return {.failure = std::string("pipe: ") + std::strerror(errno)};
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {in[0], in[1], err[0], err[1]}) ::close(fd);
    return {.failure = std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(in[0], 0);
    ::dup2(2, 1);  // its output goes to warren's standard error, not among the result lines
    ::dup2(err[1], 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(argv[0], argv, envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // as the child does: whichever runs first, the group exists before a kill
  {
    std::lock_guard lock(running_mutex);
    running_groups.insert(pid);
  }
  int to_child = in[1], from_child = err[0];
  ::close(in[0]);
  ::close(err[1]);
  ::fcntl(to_child, F_SETFL, O_NONBLOCK);
  std::size_t written = 0;
  if (input.empty()) close_fd(to_child);
  std::string pending;  // the current, unfinished line of its output
  std::string last;
  char buf[4096];
  while (from_child >= 0) {
    pollfd fds[2];
    int n = 0;
    fds[n++] = {from_child, POLLIN, 0};
    if (to_child >= 0) fds[n++] = {to_child, POLLOUT, 0};
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (to_child >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(to_child, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<std::size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) close_fd(to_child);  // it stopped reading: fine
      if (written == input.size()) close_fd(to_child);
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t r = ::read(from_child, buf, sizeof buf);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        close_fd(from_child);
        break;
      }
      (void)!::write(2, buf, static_cast<std::size_t>(r));
      pending.append(buf, static_cast<std::size_t>(r));
      for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
        if (nl > 0) last = pending.substr(0, nl);
        pending.erase(0, nl + 1);
      }
      if (pending.size() > 65536) pending.erase(0, pending.size() - 65536);
    }
  }
  close_fd(to_child);
  if (!pending.empty()) last = pending;
  int status = 0;
  // Waited for without reaping, then taken off the kill list, then reaped: the id is never
  // killed once it could be another process's.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard lock(running_mutex);
    running_groups.erase(pid);
  }
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  result.last_error_line = std::move(last);
  return result;
}

}  // namespace warren::cli
