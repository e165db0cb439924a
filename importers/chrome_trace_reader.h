#pragma once
// Reads a Chrome / Kineto trace (JSON, or gzip-compressed JSON: `.json.gz`, told by its first
// bytes) as a stream: one pass, records handed over in batches, so memory stays bounded by a
// batch whatever the file's size (a multi-GB trace imports in the memory of its longest event).
// Both of the format's forms: an object with a `traceEvents` array beside other keys (Kineto's:
// `baseTimeNanoseconds`, `deviceProperties`, ...) and a bare array of events.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>

#include "importers/trace_records.h"

namespace ts::importers {

struct TraceSummary {
  int64_t events = 0;      // records handed over
  int64_t skipped = 0;     // elements of traceEvents that are not objects
  int64_t bytes_read = 0;  // of the JSON (after decompression)
  bool gzip = false;
  // Kineto's `baseTimeNanoseconds`: the wall-clock (ns since the epoch) that ts 0 stands for.
  std::optional<int64_t> base_time_ns;
};

// Calls `on_batch` with the records in file order, at most `batch` at a time (the span is valid
// during the call only). Throws TraceError; whatever `on_batch` throws goes through.
TraceSummary read_chrome_trace(const std::filesystem::path& path, size_t batch,
                               const std::function<void(std::span<const TraceRecord>)>& on_batch);

}  // namespace ts::importers
