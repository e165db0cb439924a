#include "importers/kineto_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "importers/chrome_trace_reader.h"
#include "profiler/gpu_analysis.h"
#include "store/writer.h"

namespace ts::importers {

namespace {

namespace fs = std::filesystem;

constexpr size_t kRowsPerWrite = 50'000;  // rows buffered before they are written

bool is_gpu_category(const std::string& cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "gpu_user_annotation";
}
bool is_host_api(const std::string& cat) { return cat == "cuda_runtime" || cat == "cuda_driver"; }

// "ProfilerStep#12" -> 12; -1 for any other name.
int64_t step_number(const std::string& name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return -1;
  int64_t n = 0;
  for (size_t i = kPrefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i])) || n > (std::numeric_limits<int64_t>::max() - 9) / 10)
      return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// HTA's rule for imported traces: NCCL's kernels are communication, told by name (a trace says
// nothing of where a kernel was launched from).
bool is_nccl(const std::string& name) {
  std::string lower(name.size(), ' ');
  std::transform(name.begin(), name.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("nccl") != std::string::npos;
}

std::string thread_key(const TraceRecord& r) {
  return (r.pid_text.empty() ? std::to_string(r.pid) : r.pid_text) + "/" +
         (r.tid_text.empty() ? std::to_string(r.tid) : r.tid_text);
}

struct Step {
  int64_t index = 0;
  double start_us = 0, end_us = 0;
};

// What the first pass learns: the steps, where time begins, the CPU threads, which runtime call
// launched what (by correlation), and which kinds of record the trace holds.
struct Survey {
  std::vector<Step> steps;  // sorted by start after the pass
  double origin_us = std::numeric_limits<double>::infinity();
  std::map<std::string, int64_t> threads;  // "pid/tid" -> small id, in order of appearance
  std::map<std::string, std::string> thread_names;
  std::vector<std::pair<int64_t, double>> launches;  // (correlation, the API call's start)
  int64_t ops = 0, gpu = 0, memory = 0;
  std::optional<int64_t> base_time_ns;

  // The step whose CPU range holds `t_us` (-1: none).
  int64_t step_at(double t_us) const {
    auto it =
        std::upper_bound(steps.begin(), steps.end(), t_us, [](double t, const Step& s) { return t < s.start_us; });
    if (it == steps.begin()) return -1;
    --it;
    return t_us <= it->end_us ? it->index : -1;
  }
};

Survey survey(const fs::path& trace, const ImportOptions& o) {
  Survey s;
  int64_t records_read = 0;
  const TraceSummary summary = read_chrome_trace(trace, o.batch, [&](std::span<const TraceRecord> records) {
    for (const TraceRecord& r : records) {
      if (r.phase == TracePhase::metadata) {
        if (r.name == "thread_name" && !r.args_name.empty()) s.thread_names[thread_key(r)] = r.args_name;
        continue;
      }
      if (!r.has_ts) continue;
      s.origin_us = std::min(s.origin_us, r.ts_us);
      if (r.phase == TracePhase::instant && r.name == "[memory]") ++s.memory;
      if (r.phase != TracePhase::complete) continue;
      if (is_gpu_category(r.cat)) {
        ++s.gpu;
        continue;
      }
      if (is_host_api(r.cat) && r.correlation) s.launches.emplace_back(*r.correlation, r.ts_us);
      if (r.cat == "python_function") continue;
      if (const int64_t n = step_number(r.name); n >= 0 && r.cat == "user_annotation") {
        s.steps.push_back({n, r.ts_us, r.ts_us + std::max(0.0, r.dur_us)});
      } else if (r.cat == "cpu_op") {
        ++s.ops;
      }
      s.threads.emplace(thread_key(r), static_cast<int64_t>(s.threads.size()));
    }
    records_read += static_cast<int64_t>(records.size());
    if (o.progress) o.progress(1, records_read);
  });
  s.base_time_ns = summary.base_time_ns;
  std::sort(s.steps.begin(), s.steps.end(), [](const Step& a, const Step& b) { return a.start_us < b.start_us; });
  std::sort(s.launches.begin(), s.launches.end());
  if (!std::isfinite(s.origin_us)) s.origin_us = 0;
  return s;
}

std::string iso_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string workload_name(const fs::path& trace, const ImportOptions& o) {
  if (!o.workload.empty()) return o.workload;
  std::string name = trace.filename().string();
  for (const char* ext : {".gz", ".json"}) {
    if (name.size() > std::strlen(ext) && name.ends_with(ext)) name.resize(name.size() - std::strlen(ext));
  }
  return name.empty() ? "imported" : name;
}

}  // namespace

ImportedRun import_kineto_trace(const fs::path& trace, const fs::path& db, const ImportOptions& o) {
  const Survey s = survey(trace, o);
  ImportedRun out;
  out.device = s.gpu > 0 ? "cuda" : "cpu";
  const auto ns = [&](double t_us) { return static_cast<int64_t>(std::llround((t_us - s.origin_us) * 1000.0)); };

  store::RunInfo info;
  info.workload = workload_name(trace, o);
  info.preset = o.preset;
  info.device = out.device;
  info.batch_size = o.batch_size;
  info.iterations = static_cast<int64_t>(s.steps.size());
  info.trace = true;
  info.framework = "pytorch";
  info.command_line = o.command_line;
  info.config_json = nlohmann::json{
      {"imported_from", fs::absolute(trace).string()},
      {"format", "kineto chrome trace"},
      {"batch_size",
       o.batch_size}}.dump();
  std::error_code ec;
  const auto written = fs::last_write_time(trace, ec);
  info.started_at = s.base_time_ns
                        ? iso_time(static_cast<std::time_t>(*s.base_time_ns / 1'000'000'000))
                        : iso_time(ec ? std::time(nullptr)
                                      : std::chrono::system_clock::to_time_t(std::chrono::file_clock::to_sys(written)));

  if (s.steps.empty())
    out.absent.push_back("iterations (no ProfilerStep#N ranges: the profiler's step() was not called)");
  if (s.ops == 0) out.absent.push_back("CPU ops (no cpu_op events)");
  if (s.gpu == 0) out.absent.push_back("GPU activities (a CPU-only trace)");
  if (s.memory == 0) out.absent.push_back("memory (no [memory] events: profile_memory was off)");
  out.absent.push_back("loss (a trace does not hold it)");
  out.absent.push_back("layers and memory categories (not in a Chrome trace)");

  store::Writer w(db);
  const int64_t run = w.begin_run(info);
  out.run_id = run;
  try {
    std::vector<store::EventRow> events;
    std::vector<store::GpuActivityRow> gpu;
    std::vector<store::SampleRow> samples;
    std::vector<profiler::GpuActivity> device_work;  // for the breakdown
    const auto write = [&](bool all) {
      if (all || events.size() >= kRowsPerWrite) w.add_events(run, events), events.clear();
      if (all || gpu.size() >= kRowsPerWrite) w.add_gpu_activities(run, gpu), gpu.clear();
      if (all || samples.size() >= kRowsPerWrite) w.add_samples(run, samples), samples.clear();
    };
    // The iteration of a GPU activity: its launching call's step, else its own start's.
    const auto launched_in = [&](const TraceRecord& r) -> int64_t {
      if (r.correlation) {
        const auto it =
            std::lower_bound(s.launches.begin(), s.launches.end(), std::pair<int64_t, double>{*r.correlation, -1e300});
        if (it != s.launches.end() && it->first == *r.correlation) return s.step_at(it->second);
      }
      return s.step_at(r.ts_us);
    };
    int64_t records_read = 0;
    read_chrome_trace(trace, o.batch, [&](std::span<const TraceRecord> records) {
      for (const TraceRecord& r : records) {
        if (!r.has_ts || (r.phase != TracePhase::complete && r.phase != TracePhase::instant)) {
          ++out.left_out;
          continue;
        }
        const int64_t start = ns(r.ts_us), end = ns(r.ts_us + std::max(0.0, r.dur_us));
        if (r.phase == TracePhase::instant) {
          if (r.name != "[memory]" || !r.total_allocated) {
            ++out.left_out;
            continue;
          }
          const std::string device =
              r.device_type.value_or(0) == 1 ? fmt::format("cuda:{}", r.device_id.value_or(0)) : "cpu";
          samples.push_back({start, "allocated_bytes:" + device, static_cast<double>(*r.total_allocated), 0});
          if (r.total_reserved)
            samples.push_back({start, "reserved_bytes:" + device, static_cast<double>(*r.total_reserved), 0});
          ++out.memory_samples;
          continue;
        }
        if (is_gpu_category(r.cat) || is_host_api(r.cat) || r.cat == "cuda_sync") {
          store::GpuActivityRow a;
          a.start_ns = start;
          a.end_ns = end;
          a.name = r.name;
          a.kind = r.cat == "kernel"                ? (is_nccl(r.name) ? "comm" : "kernel")
                   : r.cat == "gpu_memcpy"          ? "memcpy"
                   : r.cat == "gpu_memset"          ? "memset"
                   : r.cat == "gpu_user_annotation" ? "marker"
                   : r.cat == "cuda_sync"           ? "sync"
                                                    : "api";
          const bool host = is_host_api(r.cat);
          a.device = host ? -1 : r.device.value_or(r.pid);
          a.stream = host ? r.tid : r.stream.value_or(r.tid);
          a.correlation = r.correlation.value_or(0);
          a.bytes = r.bytes.value_or(0);
          a.iteration = host ? s.step_at(r.ts_us) : launched_in(r);
          if (a.kind == "kernel" || a.kind == "comm" || a.kind == "memcpy" || a.kind == "memset") {
            profiler::GpuActivity g;
            g.start_ns = start;
            g.end_ns = end;
            g.kind = a.kind == "kernel"   ? profiler::GpuKind::kernel
                     : a.kind == "comm"   ? profiler::GpuKind::comm
                     : a.kind == "memcpy" ? profiler::GpuKind::memcpy
                                          : profiler::GpuKind::memset;
            g.device = static_cast<int16_t>(a.device);
            g.iteration = static_cast<int32_t>(a.iteration);
            device_work.push_back(g);
          }
          gpu.push_back(std::move(a));
          ++out.gpu_activities;
        } else if (r.cat == "cpu_op" || r.cat == "user_annotation") {
          const bool step = step_number(r.name) >= 0 && r.cat == "user_annotation";
          const auto thread = s.threads.find(thread_key(r));
          events.push_back({start, end, r.name, "",
                            step                ? "iteration"
                            : r.cat == "cpu_op" ? "op"
                                                : "phase",
                            "none", s.step_at(r.ts_us), thread == s.threads.end() ? 0 : thread->second, 0});
          ++out.cpu_events;
        } else {
          ++out.left_out;  // python_function and categories the store has no place for
        }
      }
      write(false);
      records_read += static_cast<int64_t>(records.size());
      if (o.progress) o.progress(2, records_read);
    });
    write(true);

    std::vector<store::IterationRow> iterations;
    for (const Step& step : s.steps)
      iterations.push_back({step.index, false, ns(step.start_us), ns(step.end_us), o.batch_size, 0.0, 0});
    w.add_iterations(run, iterations);
    out.iterations = static_cast<int64_t>(iterations.size());
    std::vector<store::GpuBreakdownRow> breakdown;
    for (const auto& b : profiler::gpu_breakdown(device_work))
      breakdown.push_back({b.device, b.iteration, b.start_ns, b.end_ns, b.compute_ns, b.comm_ns, b.memcpy_ns,
                           b.memset_ns, b.overlap_ns, b.exposed_comm_ns, b.busy_ns, b.idle_ns, 0});
    w.add_gpu_breakdown(run, breakdown);

    std::vector<store::EnvEntry> env = {{"imported_from", fs::absolute(trace).string()},
                                        {"trace_format", "kineto chrome trace"},
                                        {"framework", "pytorch"},
                                        {"absent", fmt::format("{}", fmt::join(out.absent, "; "))},
                                        {"left_out_records", std::to_string(out.left_out)}};
    if (s.base_time_ns) env.push_back({"trace_base_time_ns", std::to_string(*s.base_time_ns)});
    for (const auto& [key, id] : s.threads) {
      const auto name = s.thread_names.find(key);
      env.push_back({fmt::format("thread_{}", id), name == s.thread_names.end() ? key : key + " " + name->second});
    }
    w.add_environment(run, env);
    w.finish_run(run, store::RunStatus::completed, iso_time(std::time(nullptr)), "");
  } catch (...) {
    w.delete_run(run);  // nothing of a trace that could not be read
    throw;
  }
  return out;
}

}  // namespace ts::importers
