#include "engine/cuda/event_pair.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <stdexcept>

#include "engine/cuda/check.h"
#include "engine/cuda/device_context.h"

namespace ts::engine::cuda {

EventPair::EventPair(int device) : device_(device) {
  DeviceContext::get(device);  // throws, with the reason, when the device is not usable
  DeviceGuard guard(device);
  // Default flags: timing on (with cudaEventDisableTiming, elapsed time would be an error).
  TS_CUDA_CHECK(cudaEventCreate(&begin_));
  try {
    TS_CUDA_CHECK(cudaEventCreate(&end_));
  } catch (...) {
    cudaEventDestroy(begin_);
    throw;
  }
}

EventPair::~EventPair() {
  // No DeviceGuard (its constructor may throw): an event is destroyed whatever device is current.
  // Errors are ignored: a destructor must not throw, and a failed destroy leaks two events.
  cudaEventDestroy(end_);
  cudaEventDestroy(begin_);
}

void EventPair::record(CUevent_st* event) {
  DeviceContext& ctx = DeviceContext::get(device_);
  DeviceGuard guard(device_);
  TS_CUDA_CHECK(cudaEventRecord(event, ctx.stream()));
}

void EventPair::begin() {
  record(begin_);
  begun_ = true;
}

void EventPair::end() {
  record(end_);
  ended_ = true;
}

int64_t EventPair::elapsed_ns() const {
  // Refused here rather than by CUDA, whose refusal would also linger as the thread's last error.
  if (!begun_ || !ended_) throw std::runtime_error("EventPair::elapsed_ns: the pair was not recorded (begin and end)");
  DeviceGuard guard(device_);
  float ms = 0;
  TS_CUDA_CHECK(cudaEventElapsedTime(&ms, begin_, end_));
  return std::llround(static_cast<double>(ms) * 1e6);
}

}  // namespace ts::engine::cuda
