// importers/chrome_trace_reader.h: a Chrome / Kineto trace read as a stream.
#include "importers/chrome_trace_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::importers;

namespace {

// What PyTorch 2.x's profiler writes, cut down: a CPU op, a step marker, a kernel with its
// args, a memcpy, a [memory] instant, metadata, a flow, and Kineto's other top-level keys
// (before and after the events, with nested arrays the reader must read past).
const std::string kKineto = R"json({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000}],
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 4242, "tid": 4242,
     "ts": 100.5, "dur": 900.25, "args": {"External id": 1, "Record function id": 0}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 4242, "tid": 4242,
     "ts": 120, "dur": 30, "args": {"External id": 7, "Input Dims": [[8, 3, 224, 224], [64, 3, 7, 7]],
     "Input type": ["float", "float"], "Sequence number": 11, "Fwd thread id": 0}},
    {"ph": "X", "cat": "kernel", "name": "void cudnn::conv_fwd<float>(...)", "pid": 0, "tid": 7,
     "ts": 125.125, "dur": 20, "args": {"External id": 7, "device": 0, "stream": 7, "correlation": 99,
     "grid": [1, 2, 3], "block": [128, 1, 1], "registers per thread": 64}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
     "ts": 110, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 98, "bytes": 1048576,
     "memory bandwidth (GB/s)": 200.5}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 4242,
     "ts": 121, "args": {"Total Reserved": 2097152, "Total Allocated": 1048576, "Bytes": -4096,
     "Addr": 140000000, "Device Id": 0, "Device Type": 1}},
    {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4242, "args": {"name": "thread 4242 (python3)"}},
    {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 125.125, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    17,
    {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1501): _call_impl",
     "pid": "Spans", "tid": "PyTorch Profiler", "ts": 101, "dur": 2}
  ],
  "traceName": "trace.json",
  "displayTimeUnit": "ms"
})json";

fs::path write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

fs::path write_gz(const fs::path& path, const std::string& text, size_t keep = std::string::npos) {
  {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  }
  if (keep != std::string::npos) fs::resize_file(path, keep);
  return path;
}

std::vector<TraceRecord> read_all(const fs::path& path, size_t batch = 1000, TraceSummary* summary = nullptr) {
  std::vector<TraceRecord> out;
  const TraceSummary s = read_chrome_trace(path, batch, [&](std::span<const TraceRecord> records) {
    EXPECT_LE(records.size(), batch);
    out.insert(out.end(), records.begin(), records.end());
  });
  if (summary != nullptr) *summary = s;
  return out;
}

TraceError::Kind error_of(const fs::path& path) {
  try {
    read_all(path);
  } catch (const TraceError& e) {
    return e.kind();
  }
  ADD_FAILURE() << path << " was read without an error";
  return TraceError::Kind::io;
}

void expect_kineto(const std::vector<TraceRecord>& r) {
  ASSERT_EQ(r.size(), 8u);
  EXPECT_EQ(r[0].phase, TracePhase::complete);
  EXPECT_EQ(r[0].cat, "user_annotation");
  EXPECT_EQ(r[0].name, "ProfilerStep#3");
  EXPECT_DOUBLE_EQ(r[0].ts_us, 100.5);
  EXPECT_DOUBLE_EQ(r[0].dur_us, 900.25);
  EXPECT_EQ(r[0].pid, 4242);
  EXPECT_EQ(r[0].external_id, 1);
  EXPECT_EQ(r[1].name, "aten::conv2d");
  EXPECT_EQ(r[1].external_id, 7);
  EXPECT_FALSE(r[1].device.has_value()) << "the op's Input Dims arrays are read past, not taken for args";
  const TraceRecord& kernel = r[2];
  EXPECT_EQ(kernel.cat, "kernel");
  EXPECT_EQ(kernel.device, 0);
  EXPECT_EQ(kernel.stream, 7);
  EXPECT_EQ(kernel.correlation, 99);
  EXPECT_EQ(kernel.external_id, 7);
  EXPECT_EQ(kernel.tid, 7);
  EXPECT_DOUBLE_EQ(kernel.ts_us, 125.125);
  EXPECT_EQ(r[3].bytes, 1048576);
  const TraceRecord& memory = r[4];
  EXPECT_EQ(memory.phase, TracePhase::instant);
  EXPECT_EQ(memory.name, "[memory]");
  EXPECT_EQ(memory.bytes, -4096);
  EXPECT_EQ(memory.total_allocated, 1048576);
  EXPECT_EQ(memory.total_reserved, 2097152);
  EXPECT_EQ(memory.device_type, 1);
  EXPECT_EQ(memory.device_id, 0);
  EXPECT_DOUBLE_EQ(memory.dur_us, -1) << "an instant has no duration";
  EXPECT_EQ(r[5].phase, TracePhase::metadata);
  EXPECT_EQ(r[5].args_name, "thread 4242 (python3)");
  EXPECT_FALSE(r[5].has_ts);
  EXPECT_EQ(r[6].phase, TracePhase::other);  // a flow
  EXPECT_EQ(r[7].pid_text, "Spans");
  EXPECT_EQ(r[7].tid_text, "PyTorch Profiler");
}

}  // namespace

TEST(ChromeTraceReader, AKinetoTraceGivesItsEventsWithTheArgsTheStoreKeeps) {
  ts::testing::ScratchDir dir("ts_trace_reader");
  TraceSummary summary;
  expect_kineto(read_all(write(dir / "t.json", kKineto), 1000, &summary));
  EXPECT_EQ(summary.events, 8);
  EXPECT_EQ(summary.skipped, 1) << "the 17 among the events";
  EXPECT_EQ(summary.base_time_ns, 1700000000000000000);
  EXPECT_FALSE(summary.gzip);
  EXPECT_EQ(summary.bytes_read, static_cast<int64_t>(kKineto.size()));
}

TEST(ChromeTraceReader, GzipIsReadAsTheSameTraceAndBatchesStayWithinTheirSize) {
  ts::testing::ScratchDir dir("ts_trace_reader");
  TraceSummary summary;
  expect_kineto(read_all(write_gz(dir / "t.json.gz", kKineto), 3, &summary));
  EXPECT_TRUE(summary.gzip);
  EXPECT_EQ(summary.events, 8);
  int batches = 0;
  read_chrome_trace(dir / "t.json.gz", 3, [&](std::span<const TraceRecord>) { ++batches; });
  EXPECT_EQ(batches, 3);  // 3 + 3 + 2
}

TEST(ChromeTraceReader, ABareArrayOfEventsIsATraceToo) {
  ts::testing::ScratchDir dir("ts_trace_reader");
  const auto r = read_all(write(dir / "a.json", R"([{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":2},
                                                   {"ph":"i","name":"b","ts":3,"pid":1,"tid":2}])"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].name, "a");
  EXPECT_EQ(r[1].phase, TracePhase::instant);
  EXPECT_TRUE(read_all(write(dir / "empty.json", R"({"traceEvents": []})")).empty());
}

TEST(ChromeTraceReader, BadFilesAreErrorsThatSayWhat) {
  ts::testing::ScratchDir dir("ts_trace_reader");
  using K = TraceError::Kind;
  EXPECT_EQ(error_of(write(dir / "cut.json", kKineto.substr(0, kKineto.size() / 2))), K::truncated);
  EXPECT_EQ(error_of(write_gz(dir / "cut.json.gz", kKineto, 200)), K::truncated);
  EXPECT_EQ(error_of(write(dir / "bad.json", R"({"traceEvents": [{"ph": "X",, }]})")), K::malformed);
  EXPECT_EQ(error_of(write(dir / "text.json", "this is not json")), K::malformed);
  EXPECT_EQ(error_of(write(dir / "other.json", R"({"results": [1, 2, 3], "traceEvents": 5})")), K::foreign);
  EXPECT_EQ(error_of(write(dir / "scalar.json", "42")), K::foreign);
  EXPECT_EQ(error_of(write(dir / "empty.json", "")), K::foreign);
  EXPECT_EQ(error_of(dir / "missing.json"), K::io);
  EXPECT_EQ(error_of(dir.path()), K::io) << "a directory";
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo), K::io) << "refused at once, not waited on";
  try {
    read_all(dir / "cut.json");
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cut.json"), std::string::npos) << e.what();
  }
}
