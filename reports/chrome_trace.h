#pragma once
// A stored run as a Chrome trace (the Trace Event JSON format that chrome://tracing, Perfetto's
// UI and Holistic Trace Analysis read): a process per rank with its CPU events and collective
// calls per thread, GPU activities per device and stream (rank 0's), CUDA API calls per OS
// thread, flow arrows from each API call to what it launched, and memory as counter tracks.
// Reads the store and nothing else.
#include <cstdint>
#include <filesystem>
#include <functional>

#include "reports/output_file.h"

namespace ts::reports {

struct ChromeTraceStats {
  int64_t cpu_events = 0;
  int64_t gpu_activities = 0;
  int64_t flows = 0;
  int64_t counters = 0;
  int64_t collectives = 0;  // collective calls (on their rank's thread, like CPU events)
};

// Writes run `run` of `db` to `out` through OutputFile (reports/output_file.h): a target that is
// the db or its -wal/-shm/-journal, a directory, a device or in a missing or unwritable directory
// is refused (OutputRefused) before anything is read or written; a failure leaves `out` as it was
// and no temporary behind; so is an existing file trainscope did not write unless `replace` says
// anything (--force). `progress(done, total)` is called now and then with event counts.
// Throws store::StoreError for a missing db or run, std::runtime_error for I/O errors.
ChromeTraceStats write_chrome_trace(const std::filesystem::path& db, int64_t run, const std::filesystem::path& out,
                                    const std::function<void(int64_t, int64_t)>& progress = {},
                                    Replace replace = Replace::ours_only);

}  // namespace ts::reports
