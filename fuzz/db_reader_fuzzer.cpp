// libFuzzer target: the input is a database file. Reader must open it and answer every query, or
// refuse with StoreError; a crash, a sanitizer report (leaks included) or any other exception is a
// finding. Each query runs on its own so that one refused table does not hide the others.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "store/error.h"
#include "store/reader.h"
#include "store/timeline.h"

namespace {
namespace fs = std::filesystem;

// One file per process (libFuzzer's -jobs / -fork workers share the temp directory), removed at exit.
class ScratchFile {
 public:
  ScratchFile() : dir_(fs::temp_directory_path() / ("trainscope-fuzz-db-" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
  }
  ~ScratchFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  fs::path path() const { return dir_ / "input.db"; }

 private:
  fs::path dir_;
};

void write_input(const fs::path& file, const uint8_t* data, size_t size) {
  // SQLite keeps -wal / -shm / -journal files beside the db; a previous input's must not leak in.
  for (const char* suffix : {"-wal", "-shm", "-journal"}) fs::remove(file.string() + suffix);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

template <class Query>
void refused_or_answered(Query&& query) {
  try {
    query();
  } catch (const ts::store::StoreError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchFile scratch;
  const fs::path file = scratch.path();
  write_input(file, data, size);
  try {
    ts::store::Reader reader(file);
    refused_or_answered([&] { (void)reader.projections(); });
    for (const auto& run : reader.runs()) {
      const int64_t id = run.id;
      refused_or_answered([&] { (void)reader.run(id); });
      refused_or_answered([&] { (void)reader.environment(id); });
      refused_or_answered([&] { (void)reader.iterations(id); });
      refused_or_answered([&] { (void)reader.phases(id); });
      refused_or_answered([&] { (void)reader.events(id); });
      refused_or_answered([&] { (void)reader.layers(id); });
      refused_or_answered([&] { (void)reader.op_summary(id); });
      refused_or_answered([&] { (void)reader.memory_timeline(id); });
      refused_or_answered([&] { (void)reader.memory_peak(id); });
      refused_or_answered([&] { (void)reader.metrics(id); });
      refused_or_answered([&] { (void)reader.samples(id); });
      refused_or_answered([&] { (void)reader.gpu_activities(id); });
      refused_or_answered([&] { (void)reader.gpu_breakdown(id); });
      refused_or_answered([&] { (void)reader.copy_summary(id); });
      refused_or_answered([&] { (void)reader.memory_changes(id); });
      refused_or_answered([&] { (void)reader.memory_live_at(id, 0); });
      refused_or_answered([&] { (void)reader.rank_breakdown(id); });
      refused_or_answered([&] { (void)reader.ps_staleness(id); });
      refused_or_answered([&] { (void)reader.ps_servers(id); });
      refused_or_answered([&] { (void)reader.gradients(id, std::nullopt); });
      refused_or_answered([&] { (void)reader.projection_of(id); });
      refused_or_answered([&] { (void)reader.projections_of_measured(id); });
      refused_or_answered([&] {  // the viewer's timeline: stored index or one built from the events
        ts::store::TimelineReader timeline(file, id);
        (void)timeline.bands();
        for (int pixels : {1, 1000}) {
          const auto w = timeline.window(timeline.start_ns(), timeline.end_ns(), pixels);
          if (!w.events.empty()) (void)timeline.details(w.events.front());
        }
      });
    }
  } catch (const ts::store::StoreError&) {
    // Not ours, corrupt, newer, or a table it cannot read: refused with a message.
  }
  return 0;
}
