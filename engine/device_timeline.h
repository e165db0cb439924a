#pragma once
// A device's own timeline, apart from the host's: waiting for the work the engine queued there,
// and timing that work where it runs. A GPU's ops return once their kernels are queued
// (engine/cuda/), so host clocks around them measure launches; the CPU's ops return when done,
// so on the CPU there is nothing to wait for and nothing to time apart. backend_registry.cpp,
// the one file that knows every backend, implements both.
#include <cstdint>
#include <memory>

#include "engine/device.h"

namespace ts::engine {

// Waits until everything the engine queued on `device` has run; returns at once on the CPU.
void synchronize(Device device);

// Two timestamps taken on a device's queue: begin() before some work is queued, end() after it,
// and elapsed_ns() once the end has run (after synchronize). Made once and recorded again and
// again: making one costs more than recording it.
class DeviceEventPair {
 public:
  virtual ~DeviceEventPair() = default;
  virtual void begin() = 0;
  virtual void end() = 0;
  // The device's time from begin to end, in ns; std::runtime_error when either was never
  // recorded or the end has not run yet.
  virtual int64_t elapsed_ns() const = 0;
};

// A pair on `device`'s queue (the CUDA backend's: the device context's stream); nullptr on the
// CPU and on meta, which have none. std::runtime_error when the device is not usable.
std::unique_ptr<DeviceEventPair> make_event_pair(Device device);

}  // namespace ts::engine
