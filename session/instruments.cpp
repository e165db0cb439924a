#include "session/instruments.h"

#include "engine/context.h"
#include "fmt/format.h"
#include "memprof/ledger.h"
#include "profiler/tracer.h"

namespace ts::session {

namespace {

// The host allocator's cache over the run (CPU blocks of 64 KiB and more): a miss is a block
// fresh from the system, whose page faults make the op that first writes it slow.
void record_host_cache(const engine::HostCacheStats& before, RunRecorder& recorder) {
  const auto s = engine::host_cache_stats();
  recorder.add_metric({"host_cache_hits", static_cast<double>(s.hits - before.hits), "allocations", -1});
  recorder.add_metric({"host_cache_misses", static_cast<double>(s.misses - before.misses), "allocations", -1});
  recorder.add_metric(
      {"host_cache_evicted_bytes", static_cast<double>(s.evicted_bytes - before.evicted_bytes), "bytes", -1});
}

// The device allocator's books and the driver's view, side by side (GPU runs): what CUPTI's
// memory records add to them is stored by the recorder. And whether TF32 was allowed.
void record_device_memory(engine::Device device, RunRecorder& recorder) {
  const engine::DeviceMemoryStats s = engine::device_memory_stats(device);
  if (!s.available) return;
  const std::string p = fmt::format("gpu{}_", device.index);
  recorder.add_metric({p + "allocator_reserved_peak_bytes", static_cast<double>(s.reserved_peak_bytes), "bytes", -1});
  recorder.add_metric({p + "allocator_used_peak_bytes", static_cast<double>(s.used_peak_bytes), "bytes", -1});
  recorder.add_metric({p + "allocator_reserved_bytes", static_cast<double>(s.reserved_bytes), "bytes", -1});
  if (s.driver_ok) {
    recorder.add_metric(
        {p + "driver_used_bytes", static_cast<double>(s.driver_total_bytes - s.driver_free_bytes), "bytes", -1});
    recorder.add_metric({p + "driver_total_bytes", static_cast<double>(s.driver_total_bytes), "bytes", -1});
  }
  recorder.add_metric({"tf32_allowed", s.tf32_allowed ? 1.0 : 0.0, "", -1});
}

}  // namespace

Instruments::Instruments(bool op_tracing, std::chrono::milliseconds sample_every) {
  auto& tracer = profiler::Tracer::global();
  tracer.clear();
  memprof::Ledger::global().clear();
  tracer.set_enabled(true);
  engine::set_op_tracing(op_tracing);
  run_start_ = collectors::read_cpu();
  sampler_.start(sample_every);
}

Instruments::~Instruments() {
  gpu_.reset();
  stop();
}

std::string Instruments::start_device(engine::Device device, bool gpu_tracing) {
  device_ = device;
  std::string status;
  if (gpu_tracing) {
    gpu_ = profiler::GpuTracer::start(profiler::Tracer::global());
    status = gpu_->status();
  }
  host_before_ = engine::host_cache_stats();
  return status;
}

void Instruments::stop_device(RunRecorder* recorder) {
  if (device_stopped_) return;
  device_stopped_ = true;
  std::optional<profiler::GpuTrace> trace;
  if (gpu_) trace = gpu_->stop();
  gpu_.reset();
  if (!recorder) {  // a rank other than 0: what it sends rank 0 is made of the trace at its end
    kept_trace_ = std::move(trace);
    return;
  }
  if (trace) recorder->set_gpu_trace(std::move(*trace));
  record_device_memory(device_, *recorder);
  record_host_cache(host_before_, *recorder);
}

std::optional<profiler::GpuTrace> Instruments::take_gpu_trace() {
  std::optional<profiler::GpuTrace> out = std::move(kept_trace_);
  kept_trace_.reset();
  return out;
}

void Instruments::stop() {
  if (stopped_) return;
  stopped_ = true;
  sampler_.stop();
  profiler::Tracer::global().set_enabled(false);
}

void Instruments::mark_timed_start() {
  timed_start_ = collectors::read_cpu();
  timed_end_.reset();
}

void Instruments::mark_timed_end() {
  if (timed_start_) timed_end_ = collectors::read_cpu();
}

std::optional<collectors::MeasurementConditions> Instruments::conditions(int threads_asked) const {
  if (!timed_start_ || !timed_end_) return std::nullopt;
  return collectors::conditions_between(run_start_, *timed_start_, *timed_end_, threads_asked);
}

}  // namespace ts::session
