#include "small_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace warren::cli {

SmallFile read_small_file(const std::string& path, std::size_t max_bytes) {
  SmallFile file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    file.error = errno;
    return file;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) file.others_can_read = (st.st_mode & S_IROTH) != 0;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      file.error = errno;
      return file;
    }
    if (n == 0) return file;
    file.text.append(buffer, static_cast<std::size_t>(n));
    if (file.text.size() > max_bytes) {
      file.too_large = true;
      return file;
    }
  }
}

}  // namespace warren::cli
