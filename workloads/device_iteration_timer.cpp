#include "workloads/device_iteration_timer.h"

#include <stdexcept>
#include <string>

#include "workloads/gpu_metric_names.h"

namespace ts::workloads {

namespace {

const char* metric_name(LoopPhase phase) {
  switch (phase) {
    case LoopPhase::data: return kGpuEventDataNs;
    case LoopPhase::forward: return kGpuEventForwardNs;
    case LoopPhase::backward: return kGpuEventBackwardNs;
    case LoopPhase::optimizer: return kGpuEventOptimizerNs;
  }
  throw std::logic_error("unknown loop phase " + std::to_string(static_cast<int>(phase)));
}

}  // namespace

std::unique_ptr<DeviceIterationTimer> DeviceIterationTimer::on(engine::Device device) {
  auto iteration = engine::make_event_pair(device);
  if (!iteration) return nullptr;
  return std::unique_ptr<DeviceIterationTimer>(new DeviceIterationTimer(device, std::move(iteration)));
}

DeviceIterationTimer::DeviceIterationTimer(engine::Device device, std::unique_ptr<engine::DeviceEventPair> iteration)
    : device_(device), iteration_(std::move(iteration)) {}

void DeviceIterationTimer::begin_iteration() {
  for (auto& p : phases_) p.used = 0;
  iteration_->begin();
}

void DeviceIterationTimer::begin_phase(LoopPhase phase) {
  PhasePairs& p = phases_[static_cast<size_t>(phase)];
  if (p.used == p.pairs.size()) p.pairs.push_back(engine::make_event_pair(device_));
  p.pairs[p.used]->begin();
}

void DeviceIterationTimer::end_phase(LoopPhase phase) {
  PhasePairs& p = phases_[static_cast<size_t>(phase)];
  p.pairs[p.used]->end();
  ++p.used;
}

void DeviceIterationTimer::end_iteration() {
  iteration_->end();
  engine::synchronize(device_);
}

void DeviceIterationTimer::report(IterationResult& it) const {
  it.device_ns = iteration_->elapsed_ns();
  it.metrics.push_back({kGpuEventNs, static_cast<double>(it.device_ns), "ns"});
  for (LoopPhase phase : {LoopPhase::data, LoopPhase::forward, LoopPhase::backward, LoopPhase::optimizer}) {
    const PhasePairs& p = phases_[static_cast<size_t>(phase)];
    if (p.used == 0) continue;  // not run on the loop's thread in this iteration
    int64_t ns = 0;
    for (size_t k = 0; k < p.used; ++k) ns += p.pairs[k]->elapsed_ns();
    it.metrics.push_back({metric_name(phase), static_cast<double>(ns), "ns"});
  }
}

}  // namespace ts::workloads
