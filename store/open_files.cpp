#include "store/open_files.h"

#include <sys/stat.h>

#include <map>
#include <mutex>
#include <utility>

namespace ts::store::detail {

namespace {
std::mutex g_mutex;
std::map<std::pair<dev_t, ino_t>, int>& open_counts() {  // guarded by g_mutex
  static std::map<std::pair<dev_t, ino_t>, int> counts;
  return counts;
}
}  // namespace

OpenFile::OpenFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // stat opens no descriptor: it is safe here
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  active_ = true;
  std::lock_guard lock(g_mutex);
  ++open_counts()[{dev_, ino_}];
}

OpenFile::~OpenFile() { release(); }

OpenFile::OpenFile(OpenFile&& other) noexcept
    : dev_(other.dev_), ino_(other.ino_), active_(std::exchange(other.active_, false)) {}

OpenFile& OpenFile::operator=(OpenFile&& other) noexcept {
  if (this != &other) {
    release();
    dev_ = other.dev_;
    ino_ = other.ino_;
    active_ = std::exchange(other.active_, false);
  }
  return *this;
}

void OpenFile::release() noexcept {
  if (!active_) return;
  active_ = false;
  std::lock_guard lock(g_mutex);
  auto it = open_counts().find({dev_, ino_});
  if (it != open_counts().end() && --it->second == 0) open_counts().erase(it);
}

bool opened_by_sqlite_here(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  std::lock_guard lock(g_mutex);
  return open_counts().contains({st.st_dev, st.st_ino});
}

}  // namespace ts::store::detail
