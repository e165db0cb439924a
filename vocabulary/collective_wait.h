#pragma once
// A rank's part of one collective call split into waiting and moving (issue 41): entered at
// `arrival_ns`, left at `end_ns`, the last rank entered at `last_arrival_ns`, all on one clock
// (rank 0's). Waiting is the time until the last rank arrived, within the rank's own call (a
// clock's bound of disagreement never makes either part negative); moving is the rest. Defined
// here once: reports/collective_split.h splits the stored calls with it, and the viewer's
// timeline (store/timeline.h) the call a selected event belongs to.
#include <algorithm>
#include <cstdint>

namespace ts::vocabulary {

struct WaitMove {
  int64_t waiting_ns = 0, moving_ns = 0;
};

inline WaitMove wait_move(int64_t arrival_ns, int64_t end_ns, int64_t last_arrival_ns) {
  const int64_t whole = std::max<int64_t>(end_ns - arrival_ns, 0);
  const int64_t waiting = std::clamp(last_arrival_ns - arrival_ns, int64_t{0}, whole);
  return {waiting, whole - waiting};
}

}  // namespace ts::vocabulary
