#include "vocabulary/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ts::vocabulary {

namespace {

std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor whatever happens.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_input_file(const std::filesystem::path& path, std::string_view what, size_t max_bytes) {
  const std::string name = std::string(what) + " '" + path.string() + "'";
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  Descriptor d{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (d.fd < 0) throw std::invalid_argument("cannot open " + name + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(d.fd, &st) != 0) throw std::invalid_argument("cannot read " + name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw std::invalid_argument(name + " is " + std::string(kind_of(st.st_mode)) + ", not a file");
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    throw std::invalid_argument(name + " holds " + std::to_string(st.st_size) + " bytes, more than the " +
                                std::to_string(max_bytes) + " such a file may have");
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(d.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::invalid_argument("cannot read " + name + ": " + std::strerror(errno));
    if (n == 0) break;  // it shrank meanwhile: what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace ts::vocabulary
