// The GPU half of RunRecorder: CUPTI's activities and the analyses over them, stored beside the
// CPU tracer's events so that one run holds both timelines.
#include <fmt/format.h>

#include <map>
#include <set>

#include "profiler/gpu_analysis.h"
#include "profiler/trace_checks.h"
#include "profiler/tracer.h"
#include "session/record.h"

namespace ts::session {

namespace {
std::string device_name(int16_t device) { return fmt::format("cuda:{}", device); }

void device_time_metrics(int16_t d, const profiler::GpuBreakdown& t, std::vector<store::MetricRow>& metrics) {
  const std::string p = fmt::format("gpu{}_", d);
  metrics.push_back({p + "span_ns", static_cast<double>(t.span_ns()), "ns", -1});
  metrics.push_back({p + "compute_ns", static_cast<double>(t.compute_ns), "ns", -1});
  metrics.push_back({p + "comm_ns", static_cast<double>(t.comm_ns), "ns", -1});
  metrics.push_back({p + "exposed_comm_ns", static_cast<double>(t.exposed_comm_ns), "ns", -1});
  metrics.push_back({p + "memcpy_ns", static_cast<double>(t.memcpy_ns), "ns", -1});
  metrics.push_back({p + "memset_ns", static_cast<double>(t.memset_ns), "ns", -1});
  metrics.push_back({p + "idle_ns", static_cast<double>(t.idle_ns), "ns", -1});
  metrics.push_back({p + "busy_fraction", t.busy_fraction(), "", -1});
}

std::vector<store::GpuBreakdownRow> to_rows(std::span<const profiler::GpuBreakdown> breakdown) {
  std::vector<store::GpuBreakdownRow> rows;
  rows.reserve(breakdown.size());
  for (const auto& b : breakdown) {
    rows.push_back({b.device, b.iteration, b.start_ns, b.end_ns, b.compute_ns, b.comm_ns, b.memcpy_ns, b.memset_ns,
                    b.overlap_ns, b.exposed_comm_ns, b.busy_ns, b.idle_ns});
  }
  return rows;
}

// The trace against what the host knows (docs/formulas.md, "GPU trace checks"): every iteration
// for the windows, warm-up included (the loop synchronises each); the counted ones for the events.
// A check that had nothing to look at (CUPTI held by another tool: an empty trace) stores
// nothing, rather than a 0 that would read as passed.
void trace_check_metrics(const profiler::GpuTrace& g, const workloads::LoopResult& loop,
                         const profiler::IterationFilter& counted, std::vector<store::MetricRow>& metrics) {
  std::vector<profiler::IterationWindow> windows;
  for (const auto& it : loop.iterations) {
    windows.push_back({static_cast<int32_t>(it.index), it.start_ns, it.end_ns, it.device_ns});
  }
  if (const auto before = profiler::starts_before_launch(g.activities); before.checked > 0) {
    metrics.push_back({"gpu_trace_kernels_before_launch", before.fraction(), "", -1});
  }
  if (const auto outside = profiler::outside_iteration(g.activities, windows); outside.checked > 0) {
    metrics.push_back({"gpu_trace_outside_iteration", outside.fraction(), "", -1});
  }
  const auto events = profiler::event_time_difference(g.activities, windows, counted);
  if (events.iterations > 0) {  // CUDA-event times are the training loop's, on a GPU only
    metrics.push_back({"gpu_trace_event_diff_max", events.max, "", -1});
    metrics.push_back({"gpu_trace_event_diff_median", events.median, "", -1});
  }
}
}  // namespace

std::vector<store::GpuBreakdownRow> gpu_breakdown_rows(const profiler::GpuTrace& trace,
                                                       const profiler::IterationFilter& counted) {
  return to_rows(profiler::gpu_breakdown(trace.activities, counted));
}

void RunRecorder::add_gpu_layer_times(std::vector<store::LayerRow>& layers, const profiler::IterationFilter& counted,
                                      double timed) const {
  if (!gpu_ || timed <= 0) return;
  const auto lookup = profiler::lookup_in(profiler::Tracer::global());
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < layers.size(); ++i) index[layers[i].layer] = i;
  for (const auto& l : profiler::gpu_layer_times(gpu_->activities, lookup, counted)) {
    auto it = index.find(l.name);
    if (it == index.end()) {  // a layer whose ops were not traced on the CPU side
      store::LayerRow r;
      r.layer = l.name;
      layers.push_back(std::move(r));
      it = index.emplace(l.name, layers.size() - 1).first;
    }
    // Per timed iteration, as the CPU columns.
    layers[it->second].gpu_forward_ns = static_cast<double>(l.forward_ns) / timed;
    layers[it->second].gpu_backward_ns = static_cast<double>(l.backward_ns) / timed;
  }
}

void RunRecorder::record_gpu(const workloads::LoopResult& loop, const profiler::IterationFilter& counted,
                             std::vector<store::MetricRow>& metrics) {
  metrics.insert(metrics.end(), extra_metrics_.begin(), extra_metrics_.end());
  if (!gpu_) return;
  const profiler::GpuTrace& g = *gpu_;
  record_gpu_devices(counted, metrics);

  // Device memory as CUPTI saw it, beside the allocator's own books (memprof): the difference is
  // what the allocator does not know (cuDNN/cuBLAS internals, the CUDA context's own allocations).
  for (const auto& m : profiler::gpu_memory(g.activities)) {
    const std::string p = fmt::format("gpu{}_", m.device);
    metrics.push_back({p + "cupti_memory_peak_bytes", static_cast<double>(m.peak_bytes), "bytes", -1});
    metrics.push_back({p + "cupti_memory_final_bytes", static_cast<double>(m.final_bytes), "bytes", -1});
  }

  metrics.push_back({"gpu_dropped_records", static_cast<double>(g.dropped_records), "count", -1});
  metrics.push_back({"gpu_incomplete_records", static_cast<double>(g.incomplete_records), "count", -1});
  metrics.push_back({"gpu_records", static_cast<double>(g.records), "count", -1});
  metrics.push_back({"gpu_activities", static_cast<double>(g.activities.size()), "count", -1});
  metrics.push_back({"gpu_unattributed_launches", static_cast<double>(g.unattributed_launches), "count", -1});
  metrics.push_back({"gpu_trace_buffers", static_cast<double>(g.buffers), "count", -1});
  metrics.push_back({"gpu_trace_buffer_bytes_peak", static_cast<double>(g.buffer_bytes_peak), "bytes", -1});
  trace_check_metrics(g, loop, counted, metrics);
}

// The activities, the per-iteration breakdown, and per device its kernels, copies and time split.
void RunRecorder::record_gpu_devices(const profiler::IterationFilter& counted, std::vector<store::MetricRow>& metrics) {
  const profiler::GpuTrace& g = *gpu_;
  const auto lookup = profiler::lookup_in(profiler::Tracer::global());
  std::vector<store::GpuActivityRow> rows;
  rows.reserve(g.activities.size());
  std::set<int16_t> devices;
  for (const auto& a : g.activities) {
    rows.push_back({a.start_ns, a.end_ns, std::string(profiler::to_string(a.kind)), std::string(lookup(a.name)),
                    std::string(lookup(a.detail)), std::string(lookup(a.layer)), std::string(lookup(a.op)),
                    std::string(profiler::to_string(a.pass)), a.device, a.stream, a.correlation, a.iteration, a.bytes});
    if (profiler::occupies_device(a.kind)) devices.insert(a.device);
  }
  writer_.add_gpu_activities(run_, rows);

  const auto breakdown = profiler::gpu_breakdown(g.activities, counted);
  writer_.add_gpu_breakdown(run_, to_rows(breakdown));

  std::vector<store::OpSummaryRow> kernels;
  std::vector<store::CopySummaryRow> copies;
  for (int16_t d : devices) {
    std::vector<profiler::GpuActivity> on_device;
    for (const auto& a : g.activities) {
      if (a.device == d) on_device.push_back(a);
    }
    for (const auto& s : profiler::kernel_summary(on_device, lookup, counted)) {
      kernels.push_back({device_name(d), s.name, s.count, s.total_ns, s.mean_ns, static_cast<double>(s.median_ns),
                         s.min_ns, s.max_ns, s.inclusive_ns});
    }
    for (const auto& s : profiler::copy_summary(on_device, lookup, counted)) {
      copies.push_back({device_name(d), s.name, s.count, s.bytes, s.total_ns});
    }
    // Per device over the timed iterations: the time split of the whole run.
    std::vector<profiler::GpuBreakdown> mine;
    for (const auto& b : breakdown) {
      if (b.device == d) mine.push_back(b);
    }
    device_time_metrics(d, profiler::total(mine), metrics);
  }
  writer_.add_op_summary(run_, kernels);
  writer_.add_copy_summary(run_, copies);
}

}  // namespace ts::session
