#include "reports/chrome_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "reports/output_file.h"
#include "reports/rank_clocks.h"
#include "store/reader.h"

namespace ts::reports {
namespace {
namespace fs = std::filesystem;

// Rank r's process id in the trace is kRankPid + r: far from the GPU ones (the device index, as
// Kineto numbers them), so the two never merge; the CUDA API's process lies past every rank's.
constexpr int64_t kRankPid = 1'000'000;
constexpr int64_t kApiPid = 2'000'000;
int64_t rank_pid(int64_t rank) { return kRankPid + rank; }

std::string json_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

// The traceEvents array, written into the output file: a comma before every event but the first.
class TraceEvents {
 public:
  explicit TraceEvents(OutputFile& file) : file_(file) {}
  void event(const std::string& json) {
    if (!first_) put(",\n");
    first_ = false;
    put(json);
  }
  void put(std::string_view s) { file_.write(s); }

 private:
  OutputFile& file_;
  bool first_ = true;
};

std::string us(int64_t ns, int64_t origin) { return fmt::format("{:.3f}", static_cast<double>(ns - origin) * 1e-3); }

std::string metadata(const char* what, int64_t pid, int64_t tid, std::string_view name) {
  return fmt::format(R"({{"ph":"M","name":"{}","pid":{},"tid":{},"args":{{"name":{}}}}})", what, pid, tid,
                     json_string(name));
}

const char* gpu_category(std::string_view kind) {
  if (kind == "kernel" || kind == "comm") return "kernel";  // HTA tells NCCL kernels by name
  if (kind == "memcpy") return "gpu_memcpy";
  if (kind == "memset") return "gpu_memset";
  if (kind == "sync") return "cuda_sync";
  if (kind == "api") return "cuda_runtime";
  if (kind == "marker") return "user_annotation";
  return "overhead";
}

}  // namespace

ChromeTraceStats write_chrome_trace(const fs::path& db, int64_t run, const fs::path& out,
                                    const std::function<void(int64_t, int64_t)>& progress, Replace replace) {
  OutputFile file(out, db, replace);  // refuses a harmful target before the run is read
  store::Reader reader(db);
  const auto info = reader.run(run);
  if (!info)
    throw store::StoreError(store::StoreError::Kind::not_found,
                            fmt::format("run {} not found in {}", run, db.string()));
  constexpr std::optional<int64_t> all_ranks = std::nullopt;
  std::vector<store::EventRow> events =
      reader.events(run, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1, all_ranks);
  std::vector<store::CollectiveRow> collectives = reader.collectives(run, all_ranks);
  const std::vector<store::GpuActivityRow> gpu = reader.gpu_activities(run);  // rank 0's
  std::vector<store::MemoryPoint> memory = reader.memory_timeline(run, all_ranks);
  // Every rank on rank 0's clock (reports/rank_clocks.h), so that one timeline holds them all.
  const RankClocks clocks(reader.rank_clocks(run));
  for (auto& e : events) {
    e.start_ns = clocks.to_rank0(e.rank, e.start_ns);
    e.end_ns = clocks.to_rank0(e.rank, e.end_ns);
  }
  for (auto& c : collectives) {
    c.start_ns = clocks.to_rank0(c.rank, c.start_ns);
    c.end_ns = clocks.to_rank0(c.rank, c.end_ns);
  }
  for (auto& m : memory) m.t_ns = clocks.to_rank0(m.rank, m.t_ns);

  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& e : events) origin = std::min(origin, e.start_ns);
  for (const auto& c : collectives) origin = std::min(origin, c.start_ns);
  for (const auto& a : gpu) origin = std::min(origin, a.start_ns);
  for (const auto& m : memory) origin = std::min(origin, m.t_ns);
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;

  ChromeTraceStats stats;
  const int64_t total = static_cast<int64_t>(events.size() + collectives.size() + gpu.size());
  int64_t done = 0;
  const auto tick = [&] {
    if (progress && ++done % 100'000 == 0) progress(done, total);
  };

  TraceEvents o(file);
  // One process's trace: rank 0 for tools that read a trace per rank (HTA, which wants a space after the colon).
  o.put("{\"displayTimeUnit\":\"ms\",\"schemaVersion\":1,\"distributedInfo\":{\"rank\": 0},");
  // How the ranks' times were set on rank 0's clock, and how far to trust it (the bound, per rank).
  std::string clock_note =
      fmt::format(R"("clocks":{{"aligned_to":"rank 0","uncertainty_ns":{},"ranks":{{)", clocks.max_uncertainty_ns());
  bool first = true;
  for (const auto& [rank, m] : clocks.models()) {
    clock_note +=
        fmt::format(R"({}"{}":{{"offset_ns":{},"drift_ppm":{:.4f},"drift_uncertainty_ppm":{:.4f},)"
                    R"("uncertainty_ns":{}}})",
                    first ? "" : ",", rank, m.offset_ns, m.drift * 1e6, m.drift_uncertainty * 1e6, m.uncertainty_ns);
    first = false;
  }
  clock_note += "}}";
  o.put(
      fmt::format("\"otherData\":{{\"producer\":\"trainscope\",\"run\":{},\"workload\":{},\"preset\":{},\"device\":{},"
                  "\"ranks\":{},\"origin_ns\":{},{}}},\n\"traceEvents\":[\n",
                  run, json_string(info->workload), json_string(info->preset), json_string(info->device), info->ranks,
                  origin, clock_note));

  // A process per rank (named, and sorted by rank), a thread per producer thread in it.
  std::set<int64_t> ranks;
  std::set<std::pair<int64_t, int64_t>> threads;  // (rank, thread)
  const auto track = [&](int64_t rank, std::optional<int64_t> thread) {
    if (ranks.insert(rank).second) {
      o.event(metadata("process_name", rank_pid(rank), 0, fmt::format("rank {}", rank)));
      o.event(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
                          rank_pid(rank), rank));
    }
    if (thread && threads.emplace(rank, *thread).second) {
      o.event(metadata("thread_name", rank_pid(rank), *thread, fmt::format("thread {}", *thread)));
    }
  };
  if (events.empty() && collectives.empty()) track(0, std::nullopt);  // rank 0's process, as ever
  for (const auto& e : events) {
    track(e.rank, e.thread);
    // Iterations under the name profilers give them (ProfilerStep#N), so that tools that split
    // traces by step (Holistic Trace Analysis) find them.
    const bool iteration = e.kind == "iteration";
    const std::string name = iteration ? fmt::format("ProfilerStep#{}", e.iteration) : e.name;
    const char* cat = e.kind == "op" ? "cpu_op" : "user_annotation";
    std::string args = fmt::format(R"("kind":{},"iteration":{})", json_string(e.kind), e.iteration);
    if (!e.layer.empty()) args += fmt::format(R"(,"layer":{})", json_string(e.layer));
    if (!e.pass.empty() && e.pass != "none") args += fmt::format(R"(,"pass":{})", json_string(e.pass));
    o.event(fmt::format(R"({{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})", cat,
                        json_string(name), rank_pid(e.rank), e.thread, us(e.start_ns, origin), us(e.end_ns, e.start_ns),
                        args));
    ++stats.cpu_events;
    tick();
  }
  // Collective calls on the thread that made them, under the collective's name.
  for (const auto& c : collectives) {
    track(c.rank, c.thread);
    o.event(fmt::format(
        R"({{"ph":"X","cat":"comm","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"bytes":{},"label":{},"iteration":{}}}}})",
        json_string(c.collective), rank_pid(c.rank), c.thread, us(c.start_ns, origin), us(c.end_ns, c.start_ns),
        c.bytes, json_string(c.label), c.iteration));
    ++stats.collectives;
    tick();
  }

  // GPU activities: a process per device, a thread per stream; API calls and NVTX ranges on a
  // process of their own, a thread per OS thread; flows from each launch to its activity.
  std::map<int64_t, std::set<int64_t>> tracks;  // pid -> tids
  struct Launch {
    int64_t start_ns, thread;
  };
  std::map<int64_t, Launch> launches;  // correlation -> the API call that launched it
  for (const auto& a : gpu) {
    if (a.kind == "api") launches[a.correlation] = {a.start_ns, a.stream};
  }
  std::map<int64_t, int64_t> device_memory;  // device -> live bytes (CUPTI's records)
  for (const auto& a : gpu) {
    tick();
    if (a.kind == "memory") {
      const int64_t live = device_memory[a.device] += a.bytes;
      o.event(fmt::format(R"({{"ph":"C","name":"device memory, CUPTI","pid":{},"ts":{},"args":{{"bytes":{}}}}})",
                          a.device, us(a.start_ns, origin), live));
      ++stats.counters;
      continue;
    }
    const bool host_side = a.kind == "api" || a.kind == "marker" || a.kind == "overhead" || a.device < 0;
    const int64_t pid = host_side ? kApiPid : a.device;
    if (tracks[pid].insert(a.stream).second) {
      if (tracks[pid].size() == 1) {
        o.event(
            metadata("process_name", pid, 0, host_side ? std::string("CUDA API") : fmt::format("GPU {}", a.device)));
      }
      o.event(metadata("thread_name", pid, a.stream,
                       host_side ? fmt::format("thread {}", a.stream) : fmt::format("stream {}", a.stream)));
    }
    // Host-side records carry no device or stream: tools that read Kineto traces (HTA) take an
    // event with a stream for a GPU event.
    std::string args =
        host_side ? fmt::format(R"("thread":{},"correlation":{},"iteration":{})", a.stream, a.correlation, a.iteration)
                  : fmt::format(R"("device":{},"stream":{},"correlation":{},"iteration":{})", a.device, a.stream,
                                a.correlation, a.iteration);
    if (!a.layer.empty()) args += fmt::format(R"(,"layer":{})", json_string(a.layer));
    if (!a.op.empty()) args += fmt::format(R"(,"op":{})", json_string(a.op));
    if (!a.pass.empty() && a.pass != "none") args += fmt::format(R"(,"pass":{})", json_string(a.pass));
    if (!a.detail.empty()) args += fmt::format(R"(,"detail":{})", json_string(a.detail));
    if (a.bytes != 0) args += fmt::format(R"(,"bytes":{})", a.bytes);
    o.event(fmt::format(R"({{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})",
                        gpu_category(a.kind), json_string(a.name), pid, a.stream, us(a.start_ns, origin),
                        us(a.end_ns, a.start_ns), args));
    ++stats.gpu_activities;
    if (!host_side && a.correlation != 0) {
      if (auto it = launches.find(a.correlation); it != launches.end()) {
        o.event(fmt::format(R"({{"ph":"s","cat":"ac2g","name":"launch","id":{},"pid":{},"tid":{},"ts":{}}})",
                            a.correlation, kApiPid, it->second.thread, us(it->second.start_ns, origin)));
        o.event(fmt::format(R"({{"ph":"f","bp":"e","cat":"ac2g","name":"launch","id":{},"pid":{},"tid":{},"ts":{}}})",
                            a.correlation, pid, a.stream, us(a.start_ns, origin)));
        ++stats.flows;
      }
    }
  }

  // The memory ledger: live bytes per category as one counter track per rank.
  std::map<std::pair<int64_t, int64_t>, std::vector<const store::MemoryPoint*>> by_time;  // (rank, t)
  for (const auto& m : memory) by_time[{m.rank, m.t_ns}].push_back(&m);
  for (const auto& [key, points] : by_time) {
    const auto& [rank, t] = key;
    track(rank, std::nullopt);
    std::string args;
    for (const auto* p : points)
      args += fmt::format("{}{}:{}", args.empty() ? "" : ",", json_string(p->category), p->live_bytes);
    o.event(fmt::format(R"({{"ph":"C","name":"memory by category","pid":{},"ts":{},"args":{{{}}}}})", rank_pid(rank),
                        us(t, origin), args));
    ++stats.counters;
  }
  o.put("\n]}\n");
  file.commit();
  if (progress) progress(total, total);
  return stats;
}

}  // namespace ts::reports
