#pragma once
// Autotuning: whether a backend may time candidate algorithms for a shape it has not seen (cuDNN's
// convolution search, engine/cuda/conv.cpp), and what it did. A search runs every candidate on
// the device, tens of milliseconds and more; in a timed iteration it would be measured as the
// step's. The training loop turns it off for its timed iterations (workloads/training_loop.cpp):
// a shape first seen there gets its algorithm from the library's heuristics instead, and what
// was made which way is counted here. Engine-wide, not per thread: a3c's learners share the
// device's plans. The CPU backend (oneDNN) has nothing to search; the switch changes nothing there.
#include <cstdint>

#include "engine/device.h"

namespace ts::engine {

// On at start.
void set_autotune(bool on);
bool autotune();

// set_autotune for a scope; the previous value is put back at its end.
class AutotuneScope {
 public:
  explicit AutotuneScope(bool on) : previous_(autotune()) { set_autotune(on); }
  ~AutotuneScope() { set_autotune(previous_); }
  AutotuneScope(const AutotuneScope&) = delete;
  AutotuneScope& operator=(const AutotuneScope&) = delete;

 private:
  bool previous_;
};

// The convolution plans a device's backend has made since the process started, by how each was
// chosen. "While off": the switch was off at the plan's start or at its end, i.e. the plan may
// have been made inside a timed iteration; a search can be that only if the switch turned off
// while it ran. Plans found in the cache are not counted.
struct ConvPlanStats {
  int64_t searched = 0;   // every candidate timed on the device
  int64_t heuristic = 0;  // the library's heuristics, nothing run
  int64_t searched_while_off = 0;
  int64_t heuristic_while_off = 0;
};

// All zeros on the CPU and on a device that is not usable (backend_registry.cpp, the one file
// that knows every backend, implements it).
ConvPlanStats conv_plan_stats(Device device);

}  // namespace ts::engine
