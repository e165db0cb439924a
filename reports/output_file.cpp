#include "reports/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace ts::reports {
namespace fs = std::filesystem;
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

[[noreturn]] void refuse(const fs::path& path, std::string_view reason) {
  throw OutputRefused(fmt::format("cannot write '{}': {}", path.string(), reason));
}

std::string errno_text(int e) { return std::generic_category().message(e); }

// Where the output goes and what is there now.
struct Target {
  fs::path path;  // a final symbolic link resolved
  fs::path dir;   // "." for a bare file name
  fs::path name;
  bool exists = false;
  struct stat st {};
};

// The system would refuse these only when the file is opened, after the work of making it.
void check_lengths(const fs::path& shown, const fs::path& p) {
  if (p.native().size() >= PATH_MAX)
    throw OutputRefused(
        fmt::format("cannot write '{}...': the path is {} bytes; paths are limited to {} bytes (PATH_MAX)",
                    p.native().substr(0, 80), p.native().size(), PATH_MAX - 1));
  for (const auto& part : p) {
    if (part.native().size() > NAME_MAX)
      refuse(shown, fmt::format("the name '{}...' is {} bytes; names are limited to {} bytes (NAME_MAX)",
                                part.native().substr(0, 40), part.native().size(), NAME_MAX));
  }
}

std::string_view kind_of(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

fs::path canonical_or_normal(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  if (ec) c = fs::absolute(p, ec).lexically_normal();
  return c;
}

// The database and the files SQLite keeps beside it are never an output: an export onto them
// would replace every stored run.
void check_not_database(const Target& t, const fs::path& shown, const fs::path& db) {
  struct Part {
    std::string_view suffix, what;
  };
  constexpr Part kParts[] = {{"", "the database being read"},
                             {"-wal", "the write-ahead log of the database being read"},
                             {"-shm", "the shared-memory index of the database being read"},
                             {"-journal", "the rollback journal of the database being read"}};
  std::vector<fs::path> bases = {db};
  std::error_code ec;
  if (fs::path real = fs::canonical(db, ec); !ec) bases.push_back(real);  // SQLite keeps -wal beside a link's target
  const fs::path target = canonical_or_normal(t.path);
  for (const fs::path& base : bases) {
    for (const Part& part : kParts) {
      const fs::path file = base.string() + std::string(part.suffix);
      struct stat st {};
      const bool same = t.exists && ::stat(file.c_str(), &st) == 0
                            ? st.st_dev == t.st.st_dev && st.st_ino == t.st.st_ino  // also hard links
                            : canonical_or_normal(file) == target;
      if (same) refuse(shown, fmt::format("it is {} ('{}')", part.what, file.string()));
    }
  }
}

// A symbolic link another user planted in a sticky, world-writable directory (/tmp): following it
// would write wherever that user chose. The kernel's protected_symlinks rule, applied here, where
// the link is resolved in user space and the kernel's check never runs.
void check_planted_link(const fs::path& shown, const fs::path& link_path, const struct stat& link) {
  const fs::path dir = link_path.parent_path().empty() ? fs::path(".") : link_path.parent_path();
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0) return;  // resolve() says what is wrong with the directory
  const bool shared_sticky = (d.st_mode & S_ISVTX) != 0 && (d.st_mode & S_IWOTH) != 0;
  if (shared_sticky && link.st_uid != ::geteuid() && link.st_uid != d.st_uid) {
    refuse(shown, fmt::format("it is a symbolic link owned by another user (uid {}) in the shared directory '{}', "
                              "which could lead anywhere that user chose; not followed",
                              link.st_uid, dir.string()));
  }
}

// An existing file that is a SQLite database, or that trainscope did not write (no "trainscope"
// within its first or last kOwnMarkWindow bytes), is replaced only when asked (--force).
void check_replaceable(const Target& t, const fs::path& shown) {
  if (t.st.st_size == 0) return;
  const int fd = ::open(t.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) refuse(shown, fmt::format("it cannot be read to tell whose it is ({})", errno_text(errno)));
  const auto read_at = [&](off_t at, size_t n) {
    std::string bytes(n, '\0');
    const ssize_t got = ::pread(fd, bytes.data(), n, at);
    bytes.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return bytes;
  };
  const auto size = static_cast<size_t>(t.st.st_size);
  const std::string head = read_at(0, std::min(size, kOwnMarkWindow));
  const std::string tail =
      size > kOwnMarkWindow ? read_at(static_cast<off_t>(size - kOwnMarkWindow), kOwnMarkWindow) : std::string();
  ::close(fd);
  if (head.starts_with(std::string_view("SQLite format 3\0", 16)))
    refuse(shown, "it is a SQLite database (a trainscope db?); --force replaces it");
  if (head.find("trainscope") == std::string::npos && tail.find("trainscope") == std::string::npos)
    refuse(shown, "it exists and is not a file trainscope wrote; --force replaces it");
}

Target resolve(const fs::path& path, const fs::path& reading_db, Replace replace) {
  if (path.empty()) throw OutputRefused("no output file given");
  check_lengths(path, path);
  if (!path.has_filename()) refuse(path, "it names a directory, not a file");
  Target t;
  t.path = path;
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    check_planted_link(path, path, link);
    // Write the file the link names: replacing the link itself would quietly detach it.
    std::error_code ec;
    t.path = fs::canonical(path, ec);
    if (ec) refuse(path, fmt::format("it is a symbolic link that does not lead to a file ({})", ec.message()));
    check_lengths(path, t.path);
  }
  t.dir = t.path.parent_path().empty() ? fs::path(".") : t.path.parent_path();
  t.name = t.path.filename();
  struct stat dir {};
  if (::stat(t.dir.c_str(), &dir) != 0) {
    refuse(path, errno == ENOENT ? fmt::format("directory '{}' does not exist", t.dir.string())
                                 : fmt::format("directory '{}': {}", t.dir.string(), errno_text(errno)));
  }
  if (!S_ISDIR(dir.st_mode)) refuse(path, fmt::format("'{}' is not a directory", t.dir.string()));
  if (::access(t.dir.c_str(), W_OK | X_OK) != 0)
    refuse(path, fmt::format("directory '{}' is not writable ({})", t.dir.string(), errno_text(errno)));
  if (::stat(t.path.c_str(), &t.st) == 0) {
    t.exists = true;
  } else if (errno != ENOENT) {
    refuse(path, errno_text(errno));
  }
  if (t.exists) {
    if (S_ISDIR(t.st.st_mode)) refuse(path, "it is a directory");
    if (!S_ISREG(t.st.st_mode))
      refuse(path, fmt::format("it is {}; only regular files are written", kind_of(t.st.st_mode)));
    if (::access(t.path.c_str(), W_OK) != 0) refuse(path, fmt::format("it is not writable ({})", errno_text(errno)));
  }
  if (!reading_db.empty()) check_not_database(t, path, reading_db);
  if (t.exists && replace == Replace::ours_only) check_replaceable(t, path);
  return t;
}

// Hidden, unique, and within NAME_MAX however long the target's name is.
std::string temp_name(const std::string& name, std::mt19937_64& rng) {
  constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  constexpr size_t kRandom = 8;
  constexpr std::string_view kTag = ".tmp-";
  std::string s = "." + name.substr(0, NAME_MAX - 1 - kTag.size() - kRandom) + std::string(kTag);
  for (size_t i = 0; i < kRandom; ++i) s += kDigits[rng() % kDigits.size()];
  return s;
}

}  // namespace

void check_output_path(const fs::path& path, const fs::path& reading_db, Replace replace) {
  resolve(path, reading_db, replace);
}

std::string own_json_text(const nlohmann::json& document) {
  std::string text = document.dump(2);
  // dump() orders keys by name; the producer goes first by hand, within the first bytes.
  if (document.is_object()) {
    text.insert(1, document.empty() ? std::string("\n  \"producer\": \"trainscope\"\n")
                                    : std::string("\n  \"producer\": \"trainscope\","));
  }
  return text + "\n";
}

OutputFile::OutputFile(const fs::path& path, const fs::path& reading_db, Replace replace)
    : path_(path), reading_db_(reading_db), replace_(replace) {
  const Target t = resolve(path, reading_db, replace);
  target_ = t.path;
  try {
    // The temporary and the rename go through the directory's descriptor: both stay in it.
    dir_fd_ = ::open(t.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd_ < 0) refuse(path, fmt::format("cannot open directory '{}': {}", t.dir.string(), errno_text(errno)));
    std::random_device device;
    std::mt19937_64 rng((uint64_t{device()} << 32) ^ device() ^ static_cast<uint64_t>(::getpid()));
    for (int attempt = 0; fd_ < 0; ++attempt) {
      std::string name = temp_name(t.name.string(), rng);
      fd_ = ::openat(dir_fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) {
        temp_name_ = std::move(name);
      } else if (errno != EEXIST || attempt == 100) {
        throw std::runtime_error(fmt::format("cannot write '{}': cannot create a temporary file in '{}': {}",
                                             path.string(), t.dir.string(), errno_text(errno)));
      }
    }
    // A replaced file keeps its permissions (the new file would otherwise get the default ones).
    if (t.exists) ::fchmod(fd_, t.st.st_mode & 07777);
    buffer_.reserve(kBufferBytes);
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

OutputFile::~OutputFile() { release(); }

void OutputFile::release() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (dir_fd_ >= 0) {
    if (!committed_ && !temp_name_.empty()) ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    ::close(dir_fd_);
  }
  dir_fd_ = -1;
}

void OutputFile::write(std::string_view bytes) {
  if (fd_ < 0) throw std::logic_error("OutputFile::write after commit");
  buffer_.append(bytes);
  if (buffer_.size() >= kBufferBytes) flush();
}

void OutputFile::write(std::span<const uint8_t> bytes) {
  write(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void OutputFile::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("writing '{}' failed: {}", path_.string(), errno_text(errno)));
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void OutputFile::commit() {
  if (fd_ < 0) throw std::logic_error("OutputFile::commit called twice");
  flush();
  if (::fsync(fd_) != 0)
    throw std::runtime_error(fmt::format("writing '{}' failed: {}", path_.string(), errno_text(errno)));
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0)
    throw std::runtime_error(fmt::format("writing '{}' failed: {}", path_.string(), errno_text(errno)));
  // Making the contents may have taken long (a big export): what the path names is checked again.
  const Target t = resolve(path_, reading_db_, replace_);
  if (t.path != target_)
    refuse(path_, fmt::format("it changed while being written (it now leads to '{}')", t.path.string()));
  if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, t.name.c_str()) != 0)
    throw std::runtime_error(fmt::format("cannot write '{}': renaming the temporary '{}' failed: {}", path_.string(),
                                         temp_name_, errno_text(errno)));
  committed_ = true;
  ::fsync(dir_fd_);  // makes the rename itself durable; best effort (not every file system can)
}

void write_output_file(const fs::path& path, const fs::path& reading_db, Replace replace,
                       const std::function<void(OutputFile&)>& produce) {
  OutputFile file(path, reading_db, replace);
  produce(file);
  file.commit();
}

}  // namespace ts::reports
