#pragma once
// What measures a run while it runs (docs/design.md, "How a run flows", 4): the CPU tracer, the memory
// ledger and the process sampler, started together and cleared of any earlier run (a suite runs
// many in one process), and on a GPU with tracing on the CUPTI tracer. One object: what it
// started, it stops, on every path out of the run.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "collectors/measurement_conditions.h"
#include "collectors/process_sampler.h"
#include "engine/device.h"
#include "engine/device_memory.h"
#include "profiler/gpu_tracer.h"
#include "session/record.h"

namespace ts::session {

class Instruments {
 public:
  // `op_tracing`: whether ops are traced one by one (--no-trace keeps the phases only).
  explicit Instruments(bool op_tracing, std::chrono::milliseconds sample_every = std::chrono::milliseconds(200));
  ~Instruments();
  Instruments(const Instruments&) = delete;
  Instruments& operator=(const Instruments&) = delete;

  const collectors::ProcessSampler& sampler() const { return sampler_; }

  // The run's device, from here on measured: its memory figures are taken against this point.
  // With `gpu_tracing` (a GPU, tracing on; on every rank), CUPTI starts; returns its status
  // (what it traces, or why not), empty when it was not asked for.
  std::string start_device(engine::Device device, bool gpu_tracing);

  // Once, after the loop (evaluation is not traced on the GPU) or after a failure: the GPU
  // trace, the device's memory books and the host allocator's cache into `recorder` (null: a
  // rank that records nothing itself, which only stops the GPU tracer and keeps its trace for
  // take_gpu_trace).
  void stop_device(RunRecorder* recorder);

  // The GPU trace stop_device kept (a rank without a recorder that traced its GPU), once.
  std::optional<profiler::GpuTrace> take_gpu_trace();

  // Stops the sampler and the tracer (also on destruction); the samples stay readable.
  void stop();

  // The timed iterations' window (the first timed iteration's start, the loop's end): what the
  // machine gave the run over it (docs/formulas.md, "Measurement conditions"); unset when the
  // window was never opened and closed (no timed iteration ran).
  void mark_timed_start();
  void mark_timed_end();
  std::optional<collectors::MeasurementConditions> conditions(int threads_asked) const;

 private:
  collectors::ProcessSampler sampler_;
  collectors::CpuReading run_start_;  // before the model is built: the load the run found
  std::optional<collectors::CpuReading> timed_start_, timed_end_;
  engine::Device device_ = engine::Device::cpu();
  engine::HostCacheStats host_before_;
  std::unique_ptr<profiler::GpuTracer> gpu_;
  std::optional<profiler::GpuTrace> kept_trace_;
  bool device_stopped_ = false;
  bool stopped_ = false;
};

}  // namespace ts::session
