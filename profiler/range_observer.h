#pragma once
// A hook on every traced range (run, iteration, phase, op, communication) while the tracer is
// enabled: the GPU profiler uses it to mark NVTX ranges, to tag the CUDA launches an op makes
// with that op's layer, pass and iteration, and those a communication range makes as
// communication (CUPTI external correlation). One observer at most; when none is set a range
// pays one more relaxed load.
#include <atomic>

#include "profiler/event.h"

namespace ts::profiler {

class RangeObserver {
 public:
  virtual ~RangeObserver() = default;
  // Called on the thread that opens or closes the range, properly nested per thread.
  virtual void begin(EventKind kind, StringId name, StringId layer, Pass pass, int32_t iteration) = 0;
  virtual void end(EventKind kind) = 0;
};

namespace detail {
inline std::atomic<RangeObserver*>& observer_slot() {
  static std::atomic<RangeObserver*> slot{nullptr};
  return slot;
}
}  // namespace detail

// The observer must outlive every range opened while it was set (unset it after the run).
inline void set_range_observer(RangeObserver* o) { detail::observer_slot().store(o, std::memory_order_release); }
inline RangeObserver* range_observer() { return detail::observer_slot().load(std::memory_order_acquire); }

}  // namespace ts::profiler
