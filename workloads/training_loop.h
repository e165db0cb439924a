#pragma once
// The one training loop every workload runs through: it times each iteration, marks the
// phases (data, forward, backward, optimizer) as profiler ranges, tags memory by phase, and
// stops cleanly when asked (Ctrl-C) or when a step fails, keeping what it measured.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/optim/gradient_exchange.h"
#include "memprof/ledger.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct IterationResult {
  int64_t index = 0;
  bool warmup = false;
  int64_t start_ns = 0, end_ns = 0;
  int64_t samples = 0;
  int64_t tokens = 0;  // sequence workloads only
  double loss = 0;
  double learning_rate = 0;
  std::vector<Metric> metrics;  // Workload::iteration_metrics()
  // On a GPU: the device time of the iteration's work, from a CUDA-event pair on the engine's
  // stream around it, the reference the GPU trace is checked against; -1 on the CPU.
  int64_t device_ns = -1;
};

struct LoopOptions {
  int64_t iterations = 10;  // timed iterations
  int64_t warmup = 2;       // before them, marked and excluded from the figures
  // The workload's device. On a GPU, each iteration ends when the device has run its work, and
  // its device time and its phases' are measured (IterationResult::device_ns, the gpu_event_*
  // metrics: gpu_metric_names.h), as are the run's convolution plans (gpu_conv_* run metrics).
  // Whatever the device, autotuning (engine/autotune.h) is off from the first timed iteration
  // to the loop's end.
  engine::Device device = engine::Device::cpu();
  const std::atomic<bool>* stop = nullptr;  // set asynchronously (signal handler) to stop after this iteration
  // After each iteration, outside its span: progress display, evaluation (whose quality it may
  // add to the iteration's metrics).
  std::function<void(IterationResult&)> on_iteration;
  // How the iteration's gradients are shared (engine/optim/gradient_exchange.h; the run session
  // picks it): nullptr is one process. Distributed, it also makes the ranks agree, before each
  // iteration, whether any of them was asked to stop.
  engine::optim::GradientExchange* exchange = nullptr;
};

// A parameter whose gradient the loop's backward passes produce (Workload::gradient_groups): what
// a projection of the run onto several ranks packs into buckets (projection/). Each time its
// gradient is final in a backward of its group, the loop records a `marker` event "gradient ready"
// whose layer is the parameter's name (traced runs only).
struct GradientTensor {
  int group = 0;
  int slot = 0;  // index in its group, registration order
  std::string name;
  int64_t bytes = 0;
};

struct LoopResult {
  std::vector<IterationResult> iterations;
  std::vector<GradientTensor> gradients;
  // Per gradient group, the global norm its step clips the gradients to (0: none): a parameter
  // server's workers push such a group after backward, not as it is produced.
  std::vector<double> gradient_clip_norms;
  bool interrupted = false;
  bool failed = false;
  std::string error;
  std::vector<Metric> metrics;  // Workload::run_metrics(), after the last iteration
  // The memory ledger's peak over the loop (from its start, with the model already built):
  // the training peak, which what runs afterwards (evaluation) must not replace.
  memprof::Snapshot memory_peak;
};

// Never throws for a failing step: the failure is returned with the iterations done before it.
LoopResult run_training(Workload& workload, const LoopOptions& options);

// Workload::evaluate outside the training iterations: the ledger and the tracer are told it is
// no iteration (-1, so it counts in no per-iteration figure), and what its forwards allocate is
// tagged activations (the data it loads tags itself inputs), not left to the default `other`.
Quality run_evaluation(Workload& workload, int64_t batches);

}  // namespace ts::workloads
