#pragma once
// The one training loop every workload runs through: it times each iteration, marks the
// phases (data, forward, backward, optimizer) as profiler ranges, tags memory by phase, and
// stops cleanly when asked (Ctrl-C) or when a step fails, keeping what it measured.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "workloads/workload.h"

namespace ts::workloads {

struct IterationResult {
  int64_t index = 0;
  bool warmup = false;
  int64_t start_ns = 0, end_ns = 0;
  int64_t samples = 0;
  int64_t tokens = 0;   // sequence workloads only
  double loss = 0;
  double learning_rate = 0;
};

struct LoopOptions {
  int64_t iterations = 10;   // timed iterations
  int64_t warmup = 2;        // before them, marked and excluded from the figures
  const std::atomic<bool>* stop = nullptr;   // set asynchronously (signal handler) to stop after this iteration
  std::function<void(const IterationResult&)> on_iteration;   // progress display
};

struct LoopResult {
  std::vector<IterationResult> iterations;
  bool interrupted = false;
  bool failed = false;
  std::string error;
};

// Never throws for a failing step: the failure is returned with the iterations done before it.
LoopResult run_training(Workload& workload, const LoopOptions& options);

}  // namespace ts::workloads
