#pragma once
// The device's own time of a training iteration and of its phases, where the device queues work
// rather than running it as it is called (a GPU): an event pair on the engine's queue around the
// iteration, and one around each run of a phase. Pairs are made as first needed and reused in
// every later iteration (a phase run k times uses k pairs); reading them waits for nothing, as
// end_iteration() has waited for the device.
#include <array>
#include <memory>
#include <vector>

#include "engine/device.h"
#include "engine/device_timeline.h"
#include "workloads/training_loop.h"

namespace ts::workloads {

enum class LoopPhase { data, forward, backward, optimizer };

class DeviceIterationTimer {
 public:
  // nullptr where the device has no queue of its own (the CPU): there, host time is device time.
  // std::runtime_error when the device is not usable.
  static std::unique_ptr<DeviceIterationTimer> on(engine::Device device);

  void begin_iteration();
  void begin_phase(LoopPhase phase);
  void end_phase(LoopPhase phase);
  // Records the iteration's end and waits until the device has run everything queued before it.
  void end_iteration();
  // The iteration's device time into `it.device_ns`, and it and each timed phase's (summed over
  // its runs) into `it.metrics` (gpu_metric_names.h). After end_iteration().
  void report(IterationResult& it) const;

 private:
  struct PhasePairs {
    std::vector<std::unique_ptr<engine::DeviceEventPair>> pairs;
    size_t used = 0;  // runs begun in this iteration
  };

  DeviceIterationTimer(engine::Device device, std::unique_ptr<engine::DeviceEventPair> iteration);

  engine::Device device_;
  std::unique_ptr<engine::DeviceEventPair> iteration_;
  std::array<PhasePairs, 4> phases_;
};

}  // namespace ts::workloads
