#pragma once
// The one way a command writes an output file (export's trace, play's PNG, reports): refuse a
// target that would destroy something before anything is written, then write a temporary beside
// it and rename it over the target at the end, so the target is either untouched or complete.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace ts::reports {

// An output path refused before anything was written (the CLI exits 2 for it).
class OutputRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether an existing file that trainscope did not write may be replaced (`--force`). A file is
// trainscope's when "trainscope" is within its first or last 4 KiB (every output names it:
// the trace's producer, the reports' titles and `producer` key, the PNG's Software text).
enum class Replace { ours_only, anything };
inline constexpr size_t kOwnMarkWindow = 4096;

// Throws OutputRefused when `path` is: empty or names a directory; longer than PATH_MAX, or with
// a component longer than NAME_MAX; in a missing, non-directory or unwritable directory; an
// existing directory, device, FIFO, socket or other non-regular file; the database `reading_db`
// (empty: none) or its -wal, -shm or -journal (the same file by device and inode when it exists,
// by canonical path otherwise: ./db, symbolic and hard links are caught); a symbolic link in a
// sticky, world-writable directory (/tmp) owned by neither the caller nor the directory's owner
// (what the kernel's protected_symlinks refuses: another user's trap), whatever `replace` says;
// with Replace::ours_only, an existing non-empty file that is a SQLite database or that
// trainscope did not write. A symbolic link is otherwise followed: the file it names is the
// target. Creates and changes nothing.
void check_output_path(const std::filesystem::path& path, const std::filesystem::path& reading_db = {},
                       Replace replace = Replace::ours_only);

// A JSON document as trainscope writes it to a file: indented, with "producer": "trainscope" as
// its first key (so that a later write knows the file as its own, kOwnMarkWindow).
std::string own_json_text(const nlohmann::json& document);

// An output file being written. The constructor checks the path (check_output_path) and creates
// a temporary in the same directory (O_CREAT | O_EXCL); commit() flushes, fsyncs and renames it
// over the target. Destroyed without commit() (a failure, an exception), it removes the temporary
// and the target stays as it was. Write errors throw std::runtime_error naming the target.
class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path, const std::filesystem::path& reading_db = {},
                      Replace replace = Replace::ours_only);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view bytes);
  void write(std::span<const uint8_t> bytes);
  void commit();

  const std::filesystem::path& path() const { return path_; }

 private:
  void flush();
  void release() noexcept;  // closes both descriptors; removes the temporary unless committed

  std::filesystem::path path_;        // as given, for messages
  std::filesystem::path reading_db_;  // checked again before the rename
  Replace replace_;                   // likewise
  std::filesystem::path target_;      // `path_` with a final symbolic link resolved
  std::string temp_name_;             // in the target's directory
  int dir_fd_ = -1;                   // the target's directory: the temporary and the rename stay in it
  int fd_ = -1;                       // the temporary; -1 once closed
  bool committed_ = false;
  std::string buffer_;
};

// OutputFile(path, reading_db), `produce` writes into it, then commit(). An exception from
// `produce` leaves no temporary and the target untouched, and is rethrown.
void write_output_file(const std::filesystem::path& path, const std::filesystem::path& reading_db, Replace replace,
                       const std::function<void(OutputFile&)>& produce);

}  // namespace ts::reports
