#include "importers/imported_steps.h"

#include <algorithm>
#include <optional>

#include "vocabulary/rates.h"
#include "vocabulary/utc_time.h"

namespace ts::importers {

std::string iso_time(std::time_t t) { return vocabulary::iso_utc(t); }

std::string run_name(const std::filesystem::path& file, const ImportOptions& o,
                     std::initializer_list<std::string_view> extensions) {
  if (!o.workload.empty()) return o.workload;
  std::string name = file.filename().string();
  for (const std::string_view ext : extensions) {
    if (name.size() > ext.size() && name.ends_with(ext)) name.resize(name.size() - ext.size());
  }
  return name.empty() ? "imported" : name;
}

int64_t write_steps(store::Writer& w, int64_t run, std::span<const ImportedStep> steps, const ImportOptions& o,
                    std::vector<store::MetricRow> extra) {
  const auto warmup = static_cast<size_t>(std::max<int64_t>(0, o.warmup_steps));
  std::vector<store::IterationRow> iterations;
  std::vector<store::MetricRow> metrics = o.metrics;
  std::vector<vocabulary::TimedIteration> timed;
  bool every_step_counted = true;
  for (size_t k = 0; k < steps.size(); ++k) {
    const ImportedStep& step = steps[k];
    // The step's known facts, else batch_size samples.
    const StepFacts f = k < o.steps.size() ? o.steps[k] : StepFacts{o.batch_size, 0, std::nullopt};
    const bool is_warmup = k < warmup;
    iterations.push_back({step.index, is_warmup, step.start_ns, step.end_ns, f.samples, f.loss.value_or(0), 0});
    if (f.tokens > 0) metrics.push_back({"tokens", static_cast<double>(f.tokens), "count", step.index});
    if (is_warmup) continue;
    every_step_counted = every_step_counted && f.samples > 0;
    timed.push_back({static_cast<double>(step.end_ns - step.start_ns) * 1e-9, static_cast<double>(f.samples),
                     static_cast<double>(f.tokens)});
  }
  w.add_iterations(run, iterations);
  const auto timed_count =
      std::count_if(timed.begin(), timed.end(), [](const vocabulary::TimedIteration& t) { return t.seconds > 0; });
  metrics.push_back({"timed_iterations", static_cast<double>(timed_count), "count", -1});
  if (o.parameter_count > 0)
    metrics.push_back({"parameter_count", static_cast<double>(o.parameter_count), "count", -1});
  if (every_step_counted) {  // a rate needs every timed step's work: none rather than a wrong one
    for (auto& f : vocabulary::rate_figures(timed, o.units))
      metrics.push_back({std::move(f.name), f.value, std::move(f.unit), -1});
  }
  metrics.insert(metrics.end(), extra.begin(), extra.end());
  w.add_metrics(run, metrics);
  return timed_count;
}

void write_gpu_breakdown(store::Writer& w, int64_t run, std::span<const profiler::GpuActivity> device_work) {
  std::vector<store::GpuBreakdownRow> rows;
  for (const auto& b : profiler::gpu_breakdown(device_work))
    rows.push_back({b.device, b.iteration, b.start_ns, b.end_ns, b.compute_ns, b.comm_ns, b.memcpy_ns, b.memset_ns,
                    b.overlap_ns, b.exposed_comm_ns, b.busy_ns, b.idle_ns, 0});
  w.add_gpu_breakdown(run, rows);
}

}  // namespace ts::importers
