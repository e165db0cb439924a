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
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "importers/chrome_trace_reader.h"
#include "importers/imported_steps.h"
#include "importers/pytorch_memory_timeline.h"
#include "importers/range_index.h"
#include "profiler/analysis.h"
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

// A layer's range: a `layer: NAME` record_function (what `trainscope run --framework pytorch`'s
// module hooks write) or a `nn.Module: NAME` Python stack entry (with_stack=True); "" for others.
std::string layer_of_range(const TraceRecord& r) {
  constexpr std::string_view kHook = "layer: ", kModule = "nn.Module: ";
  if (r.cat == "user_annotation" && r.name.starts_with(kHook)) return r.name.substr(kHook.size());
  if (r.cat == "python_function" && r.name.starts_with(kModule)) return r.name.substr(kModule.size());
  return "";
}

// A user_annotation is the user's phase (record_function), unless PyTorch recorded it itself: its
// DataLoader's `enumerate(DataLoader)#...` is the data phase, and its optimizer's and DDP's own
// ranges (`Optimizer.step#SGD.step`, `DistributedDataParallel.forward`) are framework work, stored
// as ops beside the aten ops they hold.
bool is_framework_range(const std::string& name) {
  return name.starts_with("Optimizer.") || name.starts_with("DistributedDataParallel.");
}
std::string phase_name(const std::string& annotation) {
  return annotation.starts_with("enumerate(DataLoader)") ? "data" : annotation;
}

int64_t abs_ns(double t_us) { return static_cast<int64_t>(std::llround(t_us * 1000.0)); }

// Names interned as the profiler's analyses take them (0: the empty string).
struct Names {
  std::vector<std::string> values{""};
  std::unordered_map<std::string, profiler::StringId> ids;
  profiler::StringId id(const std::string& name) {
    if (name.empty()) return 0;
    const auto [it, fresh] = ids.try_emplace(name, static_cast<profiler::StringId>(values.size()));
    if (fresh) values.push_back(name);
    return it->second;
  }
  profiler::NameLookup lookup() const {
    return [this](profiler::StringId id) -> std::string_view { return values.at(id); };
  }
};

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
  // Names interned once for the whole import (the ranges' here, the ops' in the second pass). The CPU
  // ranges that give an op its pass (phases: forward, backward, ...) and its layer, by
  // interned name; the layer of each autograd sequence number its forward ops ran in, which the
  // backward nodes they made carry (PyTorch's own link from a backward op to its forward op).
  Names names;
  RangeIndex phases, layers;
  std::unordered_map<int64_t, profiler::StringId> sequence_layer;

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
  struct Sequenced {
    int64_t sequence, thread, t_ns;
  };
  std::vector<Sequenced> sequenced;  // forward candidates, resolved once the layers are known
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
      const std::string layer = layer_of_range(r);
      if (r.cat == "python_function" && layer.empty()) continue;
      const int64_t thread = s.threads.emplace(thread_key(r), static_cast<int64_t>(s.threads.size())).first->second;
      const int64_t start = abs_ns(r.ts_us), end = abs_ns(r.ts_us + std::max(0.0, r.dur_us));
      if (!layer.empty()) {
        s.layers.add(thread, start, end, static_cast<int32_t>(s.names.id(layer)));
      } else if (const int64_t n = step_number(r.name); n >= 0 && r.cat == "user_annotation") {
        s.steps.push_back({n, r.ts_us, r.ts_us + std::max(0.0, r.dur_us)});
      } else if (r.cat == "user_annotation" && !is_framework_range(r.name)) {
        s.phases.add(thread, start, end, static_cast<int32_t>(s.names.id(phase_name(r.name))));
      } else if (r.cat == "cpu_op" || r.cat == "user_annotation") {
        ++s.ops;
        if (r.sequence) sequenced.push_back({*r.sequence, thread, start});
      }
    }
    records_read += static_cast<int64_t>(records.size());
    if (o.progress) o.progress(1, records_read);
  });
  s.base_time_ns = summary.base_time_ns;
  s.phases.finish();
  s.layers.finish();
  // A sequence number first seen inside a layer belongs to it: its forward op ran there.
  std::sort(sequenced.begin(), sequenced.end(), [](const Sequenced& a, const Sequenced& b) { return a.t_ns < b.t_ns; });
  for (const Sequenced& q : sequenced) {
    if (s.sequence_layer.contains(q.sequence)) continue;
    if (const auto layer = s.layers.innermost(q.thread, q.t_ns)) s.sequence_layer.emplace(q.sequence, *layer);
  }
  std::sort(s.steps.begin(), s.steps.end(), [](const Step& a, const Step& b) { return a.start_us < b.start_us; });
  std::sort(s.launches.begin(), s.launches.end());
  if (!std::isfinite(s.origin_us)) s.origin_us = 0;
  return s;
}

profiler::Pass pass_of(std::string_view phase) {
  return phase == "forward"    ? profiler::Pass::forward
         : phase == "backward" ? profiler::Pass::backward
                               : profiler::Pass::none;
}

std::string pass_name(profiler::Pass p) {
  return p == profiler::Pass::forward ? "forward" : p == profiler::Pass::backward ? "backward" : "none";
}

// The op summary (self time from the nesting, as trainscope's own runs: profiler::op_summary) and
// the layers (forward and backward time of each layer's outermost ops) over the timed steps.
void write_summaries(store::Writer& w, int64_t run, const std::vector<profiler::Event>& ops, const Names& names,
                     const profiler::IterationFilter& timed, double timed_count, ImportedRun& out) {
  const auto lookup = names.lookup();
  std::vector<store::OpSummaryRow> rows;
  for (const auto& st : profiler::op_summary(ops, lookup, timed)) {
    rows.push_back({"cpu", st.name, st.count, st.total_ns, st.mean_ns, static_cast<double>(st.median_ns), st.min_ns,
                    st.max_ns, st.inclusive_ns, static_cast<double>(st.median_per_iteration_ns), st.per_iteration_ns});
  }
  w.add_op_summary(run, rows);
  out.ops = static_cast<int64_t>(rows.size());
  std::vector<store::LayerRow> layers;
  const auto per_step = [&](int64_t v) { return timed_count > 0 ? static_cast<double>(v) / timed_count : 0.0; };
  for (const auto& l : profiler::layer_times(ops, lookup, timed)) {
    store::LayerRow r;
    r.layer = l.name;
    r.op_types = fmt::format("{}", fmt::join(l.ops, ","));
    r.calls = static_cast<int64_t>(std::llround(per_step(l.calls)));
    r.forward_ns = per_step(l.forward_ns);
    r.backward_ns = per_step(l.backward_ns);
    r.median_per_iteration_ns = static_cast<double>(l.median_per_iteration_ns);
    r.per_iteration_ns = l.per_iteration_ns;
    layers.push_back(std::move(r));
  }
  w.add_layers(run, layers);
  out.layers = static_cast<int64_t>(layers.size());
}

// What the absent list says of the trace (never stored as zero).
std::vector<std::string> absent_in(const Survey& s, const ImportOptions& o) {
  std::vector<std::string> absent;
  if (s.steps.empty()) absent.push_back("iterations (no ProfilerStep#N ranges: the profiler's step() was not called)");
  if (s.ops == 0) absent.push_back("CPU ops (no cpu_op events)");
  if (s.gpu == 0) absent.push_back("GPU activities (a CPU-only trace)");
  if (s.memory == 0) absent.push_back("memory (no [memory] events: profile_memory was off)");
  if (std::none_of(o.steps.begin(), o.steps.end(), [](const StepFacts& f) { return f.loss.has_value(); }))
    absent.push_back("loss (a trace does not hold it)");
  if (!s.steps.empty() && o.batch_size <= 0 && o.steps.empty())
    absent.push_back("throughput (the samples per step were not given: --batch)");
  if (s.layers.empty())
    absent.push_back("layers (no `layer: NAME` record_function ranges and no `nn.Module: NAME` entries of with_stack)");
  if (o.memory_timeline.empty())
    absent.push_back("memory categories (not in a Chrome trace; PyTorch's export_memory_timeline has them)");
  return absent;
}

}  // namespace

ImportedRun import_kineto_trace(const fs::path& trace, const fs::path& db, const ImportOptions& o) {
  if (o.warmup_steps < 0) throw std::invalid_argument("warm-up steps must be 0 or more");
  Survey s = survey(trace, o);  // its names table takes the ops' names too, in the second pass
  ImportedRun out;
  out.device = s.gpu > 0 ? "cuda" : "cpu";
  const auto ns = [&](double t_us) { return static_cast<int64_t>(std::llround((t_us - s.origin_us) * 1000.0)); };
  const auto steps = static_cast<int64_t>(s.steps.size());
  const int64_t warmup = std::min(o.warmup_steps, steps);
  // The steps out of the figures: the first `warmup` in time order.
  std::set<int64_t> warmup_steps;
  for (int64_t k = 0; k < warmup; ++k) warmup_steps.insert(s.steps[static_cast<size_t>(k)].index);
  const profiler::IterationFilter timed = [&](int32_t i) { return i >= 0 && !warmup_steps.contains(i); };

  store::RunInfo info;
  info.workload = run_name(trace, o, {".gz", ".json"});
  info.preset = o.preset;
  info.device = out.device;
  info.batch_size = o.batch_size;
  info.iterations = steps - warmup;
  info.warmup = warmup;
  info.threads = o.threads;
  info.seed = o.seed;
  info.parameter_count = o.parameter_count;
  info.trace = true;
  info.framework = o.framework;
  info.command_line = o.command_line;
  nlohmann::json config = o.config;
  config["imported_from"] = fs::absolute(trace).string();
  config["format"] = "kineto chrome trace";
  config["batch_size"] = o.batch_size;
  config["warmup_steps"] = warmup;
  info.config_json = config.dump();
  std::error_code ec;
  const auto written = fs::last_write_time(trace, ec);
  // Kineto's `ts` count from baseTimeNanoseconds (wall clock): the first event's time is the start.
  info.started_at = s.base_time_ns
                        ? iso_time(static_cast<std::time_t>(
                              (*s.base_time_ns + static_cast<int64_t>(s.origin_us * 1000.0)) / 1'000'000'000))
                        : iso_time(ec ? std::time(nullptr)
                                      : std::chrono::system_clock::to_time_t(std::chrono::file_clock::to_sys(written)));
  out.absent = absent_in(s, o);
  // Read before the run is begun: a timeline that cannot be read leaves nothing, as a trace.
  std::optional<MemoryTimeline> memory;
  if (!o.memory_timeline.empty()) memory = read_memory_timeline(o.memory_timeline, s.origin_us);

  store::Writer w(db);
  const int64_t run = w.begin_run(info);
  out.run_id = run;
  try {
    std::vector<store::EventRow> events;
    std::vector<store::PhaseRow> phases;
    std::vector<store::GpuActivityRow> gpu;
    std::vector<store::SampleRow> samples;
    std::vector<profiler::GpuActivity> device_work;  // for the breakdown
    std::vector<profiler::Event> ops;                // for the op and layer summaries
    // Sized by the survey's counts: a vector that doubles past them would hold half again as much
    // (the 2 GB benchmark's peak RSS, docs/measurements.md).
    device_work.reserve(static_cast<size_t>(s.gpu));
    ops.reserve(static_cast<size_t>(s.ops));
    const auto write = [&](bool all) {
      if (all || events.size() >= kRowsPerWrite) w.add_events(run, events), events.clear();
      if (all || phases.size() >= kRowsPerWrite) w.add_phases(run, phases), phases.clear();
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
          continue;
        }
        if ((r.cat != "cpu_op" && r.cat != "user_annotation") || !layer_of_range(r).empty()) {
          ++out.left_out;  // python_function, a layer's own range (its ops carry it), and what has no place
          continue;
        }
        const auto found = s.threads.find(thread_key(r));
        const int64_t thread = found == s.threads.end() ? 0 : found->second;
        const int64_t iteration = s.step_at(r.ts_us);
        const bool step = step_number(r.name) >= 0 && r.cat == "user_annotation";
        if (r.cat == "user_annotation" && !step && !is_framework_range(r.name)) {
          phases.push_back({iteration, phase_name(r.name), start, end, 0});
          events.push_back({start, end, phase_name(r.name), "", "phase", "none", iteration, thread, 0});
          ++out.cpu_events;
          continue;
        }
        std::string layer, pass = "none";
        if (!step) {  // a CPU op: its pass from the phase it ran in, its layer from its range or its forward op
          const int64_t t = abs_ns(r.ts_us);
          profiler::Pass p = profiler::Pass::none;
          if (const auto phase = s.phases.innermost(thread, t))
            p = pass_of(s.names.values[static_cast<size_t>(*phase)]);
          profiler::StringId layer_id = 0;
          if (const auto in = s.layers.innermost(thread, t)) {
            layer_id = static_cast<profiler::StringId>(*in);
            if (p == profiler::Pass::none) p = profiler::Pass::forward;
          } else if (const auto q = r.sequence ? s.sequence_layer.find(*r.sequence) : s.sequence_layer.end();
                     q != s.sequence_layer.end()) {
            layer_id = q->second;  // a backward node of an op that ran in that layer
            if (p == profiler::Pass::none) p = profiler::Pass::backward;
          }
          layer = s.names.values[layer_id];
          pass = pass_name(p);
          profiler::Event e;
          e.start_ns = start;
          e.end_ns = end;
          e.name = s.names.id(r.name);
          e.layer = layer_id;
          e.kind = profiler::EventKind::op;
          e.pass = p;
          e.iteration = static_cast<int32_t>(iteration);
          e.thread = static_cast<uint32_t>(thread);
          ops.push_back(e);
        }
        events.push_back({start, end, r.name, layer, step ? "iteration" : "op", pass, iteration, thread, 0});
        ++out.cpu_events;
      }
      write(false);
      records_read += static_cast<int64_t>(records.size());
      if (o.progress) o.progress(2, records_read);
    });
    write(true);

    std::vector<ImportedStep> step_rows;
    for (const Step& step : s.steps) step_rows.push_back({step.index, ns(step.start_us), ns(step.end_us)});
    const int64_t timed_count =
        write_steps(w, run, step_rows, o, {{"trace_events", static_cast<double>(out.cpu_events), "count", -1}});
    out.iterations = static_cast<int64_t>(step_rows.size());
    write_summaries(w, run, ops, s.names, timed, static_cast<double>(timed_count), out);
    ops = {};

    write_gpu_breakdown(w, run, device_work);
    if (memory) {  // by category over time, and at the peak, as trainscope's own ledger gives them
      w.add_memory_timeline(run, memory->points);
      w.add_memory_peak(run, memory->peak);
      int64_t weights = 0;
      for (const auto& p : memory->peak) weights += p.category == "weights" ? p.bytes : 0;
      w.add_metrics(run, std::vector<store::MetricRow>{
                             {"peak_memory_bytes", static_cast<double>(memory->peak_bytes), "bytes", -1},
                             {"weights_bytes", static_cast<double>(weights), "bytes", -1}});
      out.memory_categories = true;
    }

    std::vector<store::EnvEntry> env = {{"imported_from", fs::absolute(trace).string()},
                                        {"trace_format", "kineto chrome trace"},
                                        {"framework", o.framework},
                                        {"absent", fmt::format("{}", fmt::join(out.absent, "; "))},
                                        {"left_out_records", std::to_string(out.left_out)}};
    if (s.base_time_ns) env.push_back({"trace_base_time_ns", std::to_string(*s.base_time_ns)});
    for (const auto& [key, id] : s.threads) {
      const auto name = s.thread_names.find(key);
      env.push_back({fmt::format("thread_{}", id), name == s.thread_names.end() ? key : key + " " + name->second});
    }
    if (memory)
      env.push_back({"memory_categories", "PyTorch's memory profiler (export_memory_timeline, " +
                                              std::to_string(memory->times) + " points): " + category_mapping_text()});
    env.insert(env.end(), o.environment.begin(), o.environment.end());
    w.add_environment(run, env);
    w.finish_run(run, store::RunStatus::completed, iso_time(std::time(nullptr)), "");
  } catch (...) {
    w.delete_run(run);  // nothing of a trace that could not be read
    throw;
  }
  return out;
}

}  // namespace ts::importers
