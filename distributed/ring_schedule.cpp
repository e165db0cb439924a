#include "distributed/ring_schedule.h"

#include <algorithm>
#include <cstdint>

namespace ts::distributed {

namespace {

template <typename T>
void reduce_typed(T* into, const T* from, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      for (size_t i = 0; i < n; ++i) into[i] += from[i];
      return;
    case ReduceOp::max:
      for (size_t i = 0; i < n; ++i) into[i] = std::max(into[i], from[i]);
      return;
    case ReduceOp::min:
      for (size_t i = 0; i < n; ++i) into[i] = std::min(into[i], from[i]);
      return;
  }
}

}  // namespace

size_t segment_begin(size_t count, int n, int s) { return count * static_cast<size_t>(s) / static_cast<size_t>(n); }

std::vector<RingStep> ring_steps(int n, int me) {
  std::vector<RingStep> steps;
  if (n <= 1) return steps;
  // Reduce-scatter: after step s, segment (me - s - 1) holds s + 2 ranks' contributions; after
  // n - 1 steps, segment (me + 1) holds all of them.
  for (int s = 0; s < n - 1; ++s) steps.push_back({(me - s + n) % n, (me - s - 1 + 2 * n) % n, true});
  // All-gather: the reduced segments go round the ring.
  for (int s = 0; s < n - 1; ++s) steps.push_back({(me + 1 - s + n) % n, (me - s + n) % n, false});
  return steps;
}

void reduce_into(void* into, const void* from, size_t n, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::f32: return reduce_typed(static_cast<float*>(into), static_cast<const float*>(from), n, op);
    case DataType::f64: return reduce_typed(static_cast<double*>(into), static_cast<const double*>(from), n, op);
    case DataType::i32: return reduce_typed(static_cast<int32_t*>(into), static_cast<const int32_t*>(from), n, op);
    case DataType::i64: return reduce_typed(static_cast<int64_t*>(into), static_cast<const int64_t*>(from), n, op);
    case DataType::u8: return reduce_typed(static_cast<uint8_t*>(into), static_cast<const uint8_t*>(from), n, op);
  }
}

}  // namespace ts::distributed
