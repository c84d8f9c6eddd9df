#include "shell_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

extern char** environ;

namespace warren::cli {
namespace {

std::mutex running_mutex;
std::set<pid_t> running;

constexpr std::size_t stderr_kept_bytes = 500;

struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

[[noreturn]] void failed(const std::string& what) { throw CommandFailed(what + ": " + std::strerror(errno)); }

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (auto nl = text.rfind('\n'); nl != std::string::npos) text.erase(0, nl + 1);
  return text;
}

}  // namespace

std::string run_shell(const std::string& command, std::string_view input) {
  int in[2], out[2], err[2];
  // Close-on-exec, so a command started by another worker never holds this one's pipes open.
  if (::pipe2(in, O_CLOEXEC) != 0) failed("pipe");
  Fd in_r{in[0]}, in_w{in[1]};
  if (::pipe2(out, O_CLOEXEC) != 0) failed("pipe");
  Fd out_r{out[0]}, out_w{out[1]};
  if (::pipe2(err, O_CLOEXEC) != 0) failed("pipe");
  Fd err_r{err[0]}, err_w{err[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_r.fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, 2);
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
  // A process group of its own: a kill reaches what the shell started too (those hold the
  // pipes open), and a terminal's Ctrl-C reaches warren alone, which then drains.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  int rc;
  {
    std::lock_guard lock(running_mutex);
    rc = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char**>(argv), environ);
    if (rc == 0) running.insert(pid);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    errno = rc;
    failed("cannot start /bin/sh");
  }
  in_r.reset();
  out_w.reset();
  err_w.reset();
  ::fcntl(in_w.fd, F_SETFL, O_NONBLOCK);

  std::string output, errors;
  std::size_t written = 0;
  if (input.empty()) in_w.reset();
  char buf[65536];
  while (out_r.fd >= 0 || err_r.fd >= 0) {
    pollfd fds[3];
    int n = 0;
    if (in_w.fd >= 0) fds[n++] = {in_w.fd, POLLOUT, 0};
    if (out_r.fd >= 0) fds[n++] = {out_r.fd, POLLIN, 0};
    if (err_r.fd >= 0) fds[n++] = {err_r.fd, POLLIN, 0};
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == in_w.fd) {
        ssize_t w = ::write(in_w.fd, input.data() + written, input.size() - written);
        // A command that does not read all its input (or exited) ends our writing, not the run.
        if (w < 0 && errno != EAGAIN && errno != EINTR) in_w.reset();
        else if (w > 0 && (written += static_cast<std::size_t>(w)) == input.size()) in_w.reset();
      } else {
        Fd& from = fds[i].fd == out_r.fd ? out_r : err_r;
        ssize_t r = ::read(from.fd, buf, sizeof buf);
        if (r > 0) {
          std::string& to = &from == &out_r ? output : errors;
          to.append(buf, static_cast<std::size_t>(r));
          if (&from == &err_r && errors.size() > 4 * stderr_kept_bytes) errors.erase(0, errors.size() - stderr_kept_bytes);
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          from.reset();
        }
      }
    }
  }
  in_w.reset();
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard lock(running_mutex);
    running.erase(pid);
  }
  std::string tail = last_line(errors);
  if (tail.size() > stderr_kept_bytes) tail.erase(0, tail.size() - stderr_kept_bytes);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return output;
  std::string why = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                      : "killed by signal " + std::to_string(WTERMSIG(status));
  if (!tail.empty()) why += ": " + tail;
  throw CommandFailed(why);
}

void kill_running_commands() noexcept {
  std::lock_guard lock(running_mutex);
  for (pid_t pid : running) ::kill(-pid, SIGKILL);  // the command's whole group
}

}  // namespace warren::cli
