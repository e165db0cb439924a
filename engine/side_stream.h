#pragma once
// A second queue on a device, beside the one all of the engine's work is queued on (the compute
// queue): work that runs alongside compute and is ordered against it on the device, by markers,
// never by the host waiting (data parallelism's communication stream,
// distributed/data_parallel.h). On the CPU there is no queue: each call does its work when made,
// markers are nothing, and the same caller code runs on CPU tensors, which is how it is tested
// where no GPU is. backend_registry.cpp makes a device's.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/device.h"

namespace ts::engine {

// A point in one queue's order: everything queued there before it was recorded. Made once and
// recorded again and again (a CUDA event: making one costs more than recording it).
class StreamMarker {
 public:
  virtual ~StreamMarker() = default;
};

// Host memory the device copies into and out of directly (page-locked for the duration): the
// copies then run asynchronously and at the link's rate. Released when destroyed, before the
// memory itself is.
class PinnedHost {
 public:
  virtual ~PinnedHost() = default;
};

class SideStream {
 public:
  virtual ~SideStream() = default;
  virtual Device device() const = 0;
  virtual std::unique_ptr<StreamMarker> make_marker() = 0;

  // Records `m` on the compute queue: everything the engine has queued on the device so far
  // (from any host thread).
  virtual void mark_compute(StreamMarker& m) = 0;
  // This queue waits on the device until `m` (recorded by mark_compute) has been reached.
  virtual void wait(StreamMarker& m) = 0;
  // Records `m` on this queue.
  virtual void mark(StreamMarker& m) = 0;
  // The compute queue waits on the device until `m` (recorded by mark) has been reached: what
  // the engine queues afterwards runs after this queue's work before `m`.
  virtual void compute_waits(StreamMarker& m) = 0;
  // The host waits until `m` has been reached (on either queue).
  virtual void host_waits(StreamMarker& m) = 0;

  // On this queue: `bytes` from `src` to `dst`, each in the device's memory or in host memory
  // (pinned host memory for a copy that does not hold the host up); zeroes; data *= factor on
  // `count` floats in the device's memory.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* dst, size_t bytes) = 0;
  virtual void scale(float* data, int64_t count, float factor) = 0;
  // The host waits until everything queued here so far has run.
  virtual void synchronize() = 0;
  // The queue for libraries that queue on it themselves (NCCL's collectives): a cudaStream_t;
  // nullptr on the CPU.
  virtual void* native() = 0;
  // Pins [data, data + bytes) of host memory for this device (nullptr on the CPU: nothing to do).
  virtual std::unique_ptr<PinnedHost> pin(void* data, size_t bytes) = 0;
};

// A new queue on `device` (the CPU's runs each call in place); std::runtime_error when the build
// has no backend for it or the device is not usable.
std::unique_ptr<SideStream> make_side_stream(Device device);

// The CPU's, by itself: what make_side_stream gives for the CPU, and what a test wraps to see the
// calls in their order.
std::unique_ptr<SideStream> make_inline_stream();

}  // namespace ts::engine
