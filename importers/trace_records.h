#pragma once
// What an imported trace holds, as the importer reads it (issue 42): one record per event of a
// Chrome / Kineto trace's `traceEvents` (the format PyTorch's profiler writes with
// `export_chrome_trace`, and `trainscope export --chrome` too), with the few `args` the store
// has a place for. Times stay as the file gives them (microseconds, `ts` and `dur`); the
// importer maps them onto nanoseconds.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace ts::importers {

// A trace's event phases (the Trace Event Format's `ph`) that the importer tells apart.
enum class TracePhase {
  complete,  // "X": a range with its duration
  instant,   // "i" / "I": a point (PyTorch's [memory] events)
  counter,   // "C"
  metadata,  // "M": process and thread names
  other,     // begin/end pairs, flows, async: counted, not imported
};

struct TraceRecord {
  TracePhase phase = TracePhase::other;
  std::string cat, name;
  double ts_us = 0;
  double dur_us = -1;  // -1: absent
  bool has_ts = false;
  // pid and tid: numbers in Kineto's traces (a GPU's pid is its device, its tid the stream);
  // a string where a producer wrote one (kept as text, the number then 0).
  int64_t pid = 0, tid = 0;
  std::string pid_text, tid_text;
  // args (absent: nullopt). device/stream/correlation: GPU activities; external_id pairs a GPU
  // activity or runtime call with the CPU op that caused it; bytes: a copy's or an allocation's
  // size (negative: freed); total_allocated / total_reserved: a [memory] event's running totals;
  // device_type: 0 CPU, 1 CUDA (PyTorch's c10::DeviceType); device_id: the memory's device;
  // sequence: an op's autograd sequence number, which the backward node it made carries too.
  std::optional<int64_t> device, stream, correlation, external_id, bytes, total_allocated, total_reserved, device_type,
      device_id, sequence;
  std::string args_name;  // a metadata event's args.name (a process or thread name)
};

// Why a trace could not be read: the file is missing or unreadable (io), is not JSON or stops
// short (malformed, truncated: the byte where it went wrong), or is JSON that is no trace
// (foreign: no traceEvents array).
class TraceError : public std::runtime_error {
 public:
  enum class Kind { io, malformed, truncated, foreign };
  TraceError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

}  // namespace ts::importers
