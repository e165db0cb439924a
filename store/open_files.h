#pragma once
// Internal: which database files this process has open through SQLite. SQLite locks with POSIX
// advisory locks, which belong to the process and are ALL released when the process closes ANY
// descriptor of the file: reading a db's header with an ifstream while a connection of ours
// is open would silently drop that connection's locks (another process could then checkpoint
// and delete the -wal under it, losing every commit since). Code that reads a db file outside
// SQLite asks here first.
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace ts::store::detail {

// Marks `path` as open in this process for its lifetime (nothing when it cannot be stat'ed).
class OpenFile {
 public:
  OpenFile() = default;
  explicit OpenFile(const std::string& path);
  ~OpenFile();
  OpenFile(OpenFile&& other) noexcept;
  OpenFile& operator=(OpenFile&& other) noexcept;
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

 private:
  void release() noexcept;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool active_ = false;
};

// True while some connection of this process has `path` (the same inode) open.
bool opened_by_sqlite_here(const std::filesystem::path& path);

}  // namespace ts::store::detail
