#include "session/record.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "distributed/comm_figures.h"
#include "memprof/ledger.h"
#include "profiler/analysis.h"
#include "profiler/tracer.h"
#include "vocabulary/rates.h"

namespace ts::session {

std::vector<store::EnvEntry> to_env_rows(const std::vector<collectors::Entry>& entries) {
  std::vector<store::EnvEntry> rows;
  for (const auto& e : entries) rows.push_back({e.key, e.value});
  return rows;
}

void append_event_rows(std::span<const profiler::Event> events, const profiler::NameLookup& lookup,
                       std::vector<store::PhaseRow>& phases, std::vector<store::EventRow>& rows) {
  rows.reserve(rows.size() + events.size());
  for (const auto& e : events) {
    if (e.kind == profiler::EventKind::phase) {
      phases.push_back({e.iteration, std::string(lookup(e.name)), e.start_ns, e.end_ns});
    }
    rows.push_back({e.start_ns, e.end_ns, std::string(lookup(e.name)), std::string(lookup(e.layer)),
                    std::string(profiler::to_string(e.kind)), std::string(profiler::to_string(e.pass)), e.iteration,
                    static_cast<int64_t>(e.thread)});
  }
}

void append_memory_points(const std::vector<memprof::Snapshot>& snapshots, std::vector<store::MemoryPoint>& rows) {
  for (const auto& snap : snapshots) {
    for (size_t c = 0; c < vocabulary::kCategoryCount; ++c) {
      rows.push_back(
          {snap.t_ns, std::string(vocabulary::to_string(static_cast<vocabulary::Category>(c))), snap.bytes[c]});
    }
  }
}

store::IterationRow to_iteration_row(const workloads::IterationResult& it) {
  return {it.index, it.warmup, it.start_ns, it.end_ns, it.samples, it.loss};
}

std::vector<store::MemoryChangeRow> memory_change_rows(const memprof::Ledger& ledger,
                                                       memprof::Ledger::ChangeCursor& cursor, size_t max,
                                                       int64_t rank) {
  std::vector<store::MemoryChangeRow> rows;
  for (auto& c : ledger.changes_since(cursor, max)) {
    rows.push_back({c.t_ns, std::string(vocabulary::to_string(c.category)), std::move(c.owner), c.delta, rank});
  }
  return rows;
}

std::vector<store::MetricRow> memory_change_counts(size_t logged, size_t kept, int64_t rank) {
  return {{"memory_changes_stored", static_cast<double>(kept), "count", -1, rank},
          {"memory_changes_dropped", static_cast<double>(logged - kept), "count", -1, rank}};
}

std::vector<store::MetricRow> store_memory_changes(store::Writer& writer, int64_t run, const memprof::Ledger& ledger,
                                                   int64_t rank, size_t limit) {
  const size_t logged = ledger.change_count();
  const size_t kept = std::min(logged, limit);
  memprof::Ledger::ChangeCursor cursor;
  for (size_t written = 0; written < kept;) {
    const auto rows = memory_change_rows(ledger, cursor, std::min(store::Writer::kChunkRows, kept - written), rank);
    if (rows.empty()) break;
    writer.add_memory_changes(run, rows);
    written += rows.size();
  }
  return memory_change_counts(logged, kept, rank);
}

std::vector<store::MetricRow> roofline_metrics(const profiler::Roofline& r) {
  if (r.iterations == 0 || r.work_ns() == 0) return {};
  std::vector<store::MetricRow> rows = {
      {"roofline_step_ns", static_cast<double>(r.total_ns), "ns", -1},
      {"roofline_iterations", static_cast<double>(r.iterations), "count", -1},
      {"roofline_data_ns", static_cast<double>(r.data_ns), "ns", -1},
      {"roofline_overhead_ns", static_cast<double>(r.overhead_ns), "ns", -1},
  };
  using profiler::WorkClass;
  for (WorkClass c : {WorkClass::compute, WorkClass::memory, WorkClass::reorder, WorkClass::other}) {
    const std::string p = "roofline_" + std::string(profiler::to_string(c)) + "_";
    const profiler::WorkTotals& w = r[c];
    rows.push_back({p + "ns", static_cast<double>(w.self_ns), "ns", -1});
    rows.push_back({p + "flops", static_cast<double>(w.flops), "FLOP", -1});
    rows.push_back({p + "bytes", static_cast<double>(w.bytes), "bytes", -1});
    rows.push_back({p + "calls", static_cast<double>(w.calls), "count", -1});
  }
  return rows;
}

namespace {

// The layer a parameter belongs to: its name without the last component.
std::string layer_of(const std::string& param) {
  const auto dot = param.rfind('.');
  return dot == std::string::npos ? std::string() : param.substr(0, dot);
}

// The iterations: every iteration's row, and the timed ones' times and work, which the rates are
// made of (vocabulary/rates.h; which iterations count: counted_iterations).
struct Timing {
  std::vector<vocabulary::TimedIteration> timed;
  std::vector<store::IterationRow> rows;
};

Timing timing_of(const workloads::LoopResult& loop) {
  Timing t;
  for (const auto& it : loop.iterations) {
    t.rows.push_back(to_iteration_row(it));
    if (it.warmup) continue;
    t.timed.push_back({static_cast<double>(it.end_ns - it.start_ns) * 1e-9, static_cast<double>(it.samples),
                       static_cast<double>(it.tokens)});
  }
  return t;
}

// A per-iteration series as stored: every value up to kStoredSeriesLength, beyond that every k-th
// (evenly spaced, in order), so a run of many iterations stores kilobytes per op, not megabytes.
// Plenty for the tests comparisons make on them (docs/formulas.md, "Culprits").
constexpr size_t kStoredSeriesLength = 2000;
std::vector<int64_t> stored_series(const std::vector<int64_t>& values) {
  if (values.size() <= kStoredSeriesLength) return values;
  const size_t stride = (values.size() + kStoredSeriesLength - 1) / kStoredSeriesLength;
  std::vector<int64_t> out;
  for (size_t i = 0; i < values.size(); i += stride) out.push_back(values[i]);
  return out;
}

// Per-layer times over the timed iterations (per iteration), their activations and parameters.
std::vector<store::LayerRow> layer_rows(const std::vector<profiler::Event>& events, const profiler::NameLookup& lookup,
                                        const profiler::IterationFilter& counted, const engine::nn::Module* model,
                                        double timed) {
  std::map<std::string, int64_t> activation_bytes, layer_params;
  for (const auto& o : memprof::Ledger::global().per_owner(vocabulary::Category::activations)) {
    activation_bytes[o.owner] = o.bytes_allocated_per_iteration;
  }
  if (model) {
    for (const auto& [name, t] : model->named_parameters()) layer_params[layer_of(name)] += t.numel();
  }
  std::vector<store::LayerRow> layers;
  std::set<std::string> seen;
  for (const auto& l : profiler::layer_times(events, lookup, counted)) {
    store::LayerRow r;
    r.layer = l.name;
    for (const auto& op : l.ops) r.op_types += (r.op_types.empty() ? "" : ",") + op;
    r.calls = timed > 0 ? static_cast<int64_t>(static_cast<double>(l.calls) / timed + 0.5) : l.calls;
    r.forward_ns = timed > 0 ? static_cast<double>(l.forward_ns) / timed : 0;
    r.backward_ns = timed > 0 ? static_cast<double>(l.backward_ns) / timed : 0;
    r.median_per_iteration_ns = static_cast<double>(l.median_per_iteration_ns);
    r.per_iteration_ns = stored_series(l.per_iteration_ns);
    r.activation_bytes = activation_bytes.contains(l.name) ? activation_bytes[l.name] : 0;
    r.parameter_count = layer_params.contains(l.name) ? layer_params[l.name] : 0;
    seen.insert(l.name);
    layers.push_back(std::move(r));
  }
  // Layers that hold parameters but ran no traced op (e.g. --no-trace) still get a row.
  for (const auto& [name, n] : layer_params) {
    if (seen.contains(name)) continue;
    store::LayerRow r;
    r.layer = name;
    r.parameter_count = n;
    r.activation_bytes = activation_bytes.contains(name) ? activation_bytes[name] : 0;
    layers.push_back(std::move(r));
  }
  return layers;
}

// What the operating system saw: comparable with frameworks that keep no allocator books.
void rss_metrics(const std::vector<collectors::Sample>& samples, std::vector<store::MetricRow>& metrics) {
  double rss_first = -1, rss_peak = 0;
  for (const auto& s : samples) {
    if (s.name != "rss_bytes") continue;
    if (rss_first < 0) rss_first = s.value;
    rss_peak = std::max(rss_peak, s.value);
  }
  if (rss_first < 0) return;
  metrics.push_back({"rss_peak_bytes", rss_peak, "bytes", -1});
  metrics.push_back({"rss_growth_bytes", rss_peak - rss_first, "bytes", -1});
}

// Rates (docs/formulas.md, "Throughput"), as vocabulary/rates.h defines them.
void rate_metrics(const Timing& t, const workloads::ThroughputUnits& units, std::vector<store::MetricRow>& metrics) {
  for (auto& f : vocabulary::rate_figures(t.timed, {units.samples, units.tokens, units.tokens_headline}))
    metrics.push_back({std::move(f.name), f.value, std::move(f.unit), -1});
}

// The loop's own figures: tokens, loss, learning rate, the workload's metrics, the quality.
void loop_metrics(const workloads::LoopResult& loop, const workloads::Quality* quality,
                  std::vector<store::MetricRow>& metrics) {
  for (const auto& it : loop.iterations) {
    if (it.tokens > 0) metrics.push_back({"tokens", static_cast<double>(it.tokens), "count", it.index});
  }
  if (!loop.iterations.empty()) {
    metrics.push_back({"loss_first", loop.iterations.front().loss, "", -1});
    metrics.push_back({"loss_last", loop.iterations.back().loss, "", -1});
  }
  for (const auto& it : loop.iterations) metrics.push_back({"learning_rate", it.learning_rate, "", it.index});
  // The workload's own (Workload::iteration_metrics / run_metrics).
  for (const auto& it : loop.iterations) {
    for (const auto& m : it.metrics) metrics.push_back({m.name, m.value, m.unit, it.index});
  }
  for (const auto& m : loop.metrics) metrics.push_back({m.name, m.value, m.unit, -1});
  if (quality) metrics.push_back({quality->metric, quality->value, quality->unit, -1});
}

}  // namespace

// Memory: the timeline per category, the breakdown at the peak and every change with its owner.
memprof::Snapshot RunRecorder::record_memory(const workloads::LoopResult& loop, bool everything,
                                             std::vector<store::MetricRow>& change_counts) {
  auto& ledger = memprof::Ledger::global();
  std::vector<store::MemoryPoint> points;
  append_memory_points(ledger.timeline(2000), points);
  if (everything) {
    writer_.add_memory_timeline(run_, points);
  } else {
    writer_.replace_memory_timeline(run_, points, 0);  // rank 0's: the other ranks' streamed timelines stay
  }
  // The training loop's peak: evaluation afterwards (detection's test-time RoIs outnumber the
  // training ones) must not stand in for it. The ledger's own when the loop never ran.
  const memprof::Snapshot peak = loop.memory_peak.t_ns > 0 ? loop.memory_peak : ledger.peak();
  writer_.add_memory_peak(run_, memory_peak_rows(peak));
  // And every change with its owner, so what was live at any time can be told by layer (not
  // streamed: a killed run keeps its timeline and peak, not this).
  change_counts = store_memory_changes(writer_, run_, ledger);
  return peak;
}

void RunRecorder::record(const workloads::LoopResult& loop, const std::vector<profiler::Event>& events,
                         const engine::nn::Module* model, const std::vector<collectors::Sample>& samples,
                         const workloads::Quality* quality, RecordScope scope) {
  const bool everything = scope == RecordScope::everything;
  const auto lookup = profiler::lookup_in(profiler::Tracer::global());
  const Timing timing = timing_of(loop);
  if (everything) writer_.add_iterations(run_, timing.rows);
  const profiler::IterationFilter counted = counted_iterations(loop);
  const double timed = static_cast<double>(std::count_if(
      timing.timed.begin(), timing.timed.end(), [](const vocabulary::TimedIteration& it) { return it.seconds > 0; }));

  if (everything) {  // phases, straight from the phase events
    std::vector<store::PhaseRow> phases;
    std::vector<store::EventRow> rows;
    append_event_rows(events, lookup, phases, rows);
    writer_.add_phases(run_, phases);
    writer_.add_events(run_, rows);
  }

  // Per-op summary (CPU "kernels") and per-layer times over the timed iterations.
  std::vector<store::OpSummaryRow> ops;
  for (const auto& s : profiler::op_summary(events, lookup, counted)) {
    ops.push_back({"cpu", s.name, s.count, s.total_ns, s.mean_ns, static_cast<double>(s.median_ns), s.min_ns, s.max_ns,
                   s.inclusive_ns, static_cast<double>(s.median_per_iteration_ns), stored_series(s.per_iteration_ns)});
  }
  writer_.add_op_summary(run_, ops);
  std::vector<store::LayerRow> layers = layer_rows(events, lookup, counted, model, timed);
  add_gpu_layer_times(layers, counted, timed);
  writer_.add_layers(run_, layers);
  std::vector<store::GradientRow> gradients;
  for (const auto& g : loop.gradients) gradients.push_back({g.group, g.slot, g.name, g.bytes});
  writer_.add_gradients(run_, gradients);

  std::vector<store::MetricRow> change_counts;
  const memprof::Snapshot peak = record_memory(loop, everything, change_counts);

  if (everything) {
    std::vector<store::SampleRow> sample_rows;
    for (const auto& s : samples) sample_rows.push_back({s.t_ns, s.name, s.value});
    writer_.add_samples(run_, sample_rows);
  }

  std::vector<store::MetricRow> metrics = {
      {"parameter_count", static_cast<double>(parameter_count_), "count", -1},
      {"timed_iterations", timed, "count", -1},
      {"peak_memory_bytes", static_cast<double>(peak.total), "bytes", -1},
      {"weights_bytes", static_cast<double>(peak.bytes[static_cast<size_t>(vocabulary::Category::weights)]), "bytes",
       -1},
      {"trace_events", static_cast<double>(events.size()), "count", -1},
  };
  metrics.insert(metrics.end(), change_counts.begin(), change_counts.end());
  for (auto& m : roofline_metrics(profiler::roofline(events, lookup, counted))) metrics.push_back(std::move(m));
  rss_metrics(samples, metrics);
  rate_metrics(timing, units_, metrics);
  loop_metrics(loop, quality, metrics);
  for (size_t g = 0; g < loop.gradient_clip_norms.size(); ++g) {  // what a projection's parameter server needs
    metrics.push_back({"gradient_clip_norm." + std::to_string(g), loop.gradient_clip_norms[g], "norm", -1});
  }
  record_gpu(loop, counted, metrics);
  writer_.add_metrics(run_, metrics);
}

std::vector<store::MetricRow> condition_metrics(const collectors::MeasurementConditions& c, int processes_on_host) {
  std::vector<store::MetricRow> rows = {
      {"conditions_window_s", c.window_s, "s", -1},
      {"conditions_threads_asked", static_cast<double>(c.threads_asked), "threads", -1},
      {"conditions_online_cores", static_cast<double>(c.online_cores), "cores", -1},
      {"conditions_job_processes_on_host", static_cast<double>(processes_on_host), "processes", -1},
      {"conditions_process_cores", c.process_cores, "cores", -1},
      {"conditions_cpu_got_of_asked_percent", c.cpu_got_of_asked_percent, "%", -1},
  };
  const auto add = [&](const char* name, const std::optional<double>& v, const char* unit) {
    if (v) rows.push_back({name, *v, unit, -1});  // unreadable: not stored (views say so)
  };
  add("conditions_other_processes_cores", c.other_processes_cores, "cores");
  add("conditions_steal_percent", c.steal_percent, "%");
  add("conditions_load_average_start", c.load_start, "load (1 min)");
  add("conditions_load_average_end", c.load_end, "load (1 min)");
  add("conditions_cpu_frequency_mhz", c.frequency_mhz, "MHz");
  return rows;
}

std::vector<store::MemoryPeakRow> memory_peak_rows(const memprof::Snapshot& peak) {
  std::vector<store::MemoryPeakRow> rows;
  for (size_t c = 0; c < vocabulary::kCategoryCount; ++c) {
    rows.push_back(
        {std::string(vocabulary::to_string(static_cast<vocabulary::Category>(c))), peak.bytes[c], peak.t_ns});
  }
  return rows;
}

void append_collective_rows(const std::vector<distributed::CollectiveRecord>& records,
                            std::vector<store::CollectiveRow>& rows) {
  for (const auto& r : records) {
    store::CollectiveRow c;
    c.iteration = r.iteration;
    c.thread = r.thread;
    c.collective = std::string(distributed::to_string(r.collective));
    c.label = r.label;
    c.bytes = r.bytes;
    c.start_ns = r.start_ns;
    c.end_ns = r.end_ns;
    rows.push_back(std::move(c));
  }
}

profiler::IterationFilter counted_iterations(const workloads::LoopResult& loop) {
  std::set<int32_t> warmup;
  for (const auto& it : loop.iterations) {
    if (it.warmup) warmup.insert(static_cast<int32_t>(it.index));
  }
  return [warmup = std::move(warmup)](int32_t i) { return i >= 0 && !warmup.contains(i); };
}

std::vector<store::RankBreakdownRow> rank_breakdown_rows(std::span<const profiler::Event> events,
                                                         const profiler::IterationFilter& counted) {
  std::vector<store::RankBreakdownRow> rows;
  for (const auto& b : profiler::comm_breakdown(events)) {
    if (!counted(b.iteration)) continue;
    store::RankBreakdownRow r;
    r.iteration = b.iteration;
    r.start_ns = b.start_ns;
    r.end_ns = b.end_ns;
    r.compute_ns = b.time.compute_ns;
    r.comm_ns = b.time.comm_ns;
    r.overlap_ns = b.time.overlap_ns;
    r.exposed_comm_ns = b.time.exposed_comm_ns;
    r.idle_ns = b.time.idle_ns;
    r.backward_wait_ns = b.wait_ns;
    // A parameter-server worker's waits (distributed/ps/worker.cpp names them).
    static const profiler::StringId pull_wait = profiler::Tracer::global().intern("pull wait");
    static const profiler::StringId push_wait = profiler::Tracer::global().intern("push wait");
    if (const auto it = b.wait_by_name.find(pull_wait); it != b.wait_by_name.end()) r.pull_wait_ns = it->second;
    if (const auto it = b.wait_by_name.find(push_wait); it != b.wait_by_name.end()) r.push_wait_ns = it->second;
    rows.push_back(r);
  }
  return rows;
}

std::vector<store::CommOpRow> comm_op_rows(const std::vector<distributed::CollectiveRecord>& records,
                                           std::string_view backend, int ranks) {
  std::vector<store::CommOpRow> rows;
  for (const auto& s : distributed::summarise(records, ranks)) {
    store::CommOpRow r;
    r.backend = std::string(backend);
    r.collective = std::string(distributed::to_string(s.collective));
    r.bytes = s.bytes;
    r.ranks = ranks;
    r.count = s.count;
    r.total_ns = s.total_ns;
    r.mean_ns = s.mean_ns;
    r.min_ns = s.min_ns;
    r.max_ns = s.max_ns;
    r.algbw_gbps = s.algbw_gbps;
    r.busbw_gbps = s.busbw_gbps;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace ts::session
