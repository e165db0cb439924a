#pragma once
// How a GPU launch learns which op, layer, pass and iteration made it, and whether it is
// communication. While an op runs, the GPU tracer pushes two CUPTI external correlation ids on
// the launching thread: one packs the layer and op names, the other the iteration and pass (the
// iteration alone is pushed for the whole iteration, so launches outside ops still get one).
// While a communication range runs (a collective's call, data parallelism's staging copies), it
// pushes a third id and the iteration: what is launched there is communication, whatever it is
// called and whichever thread issued it. CUPTI reports, per API call, the ids that were on top;
// attribute_launches() maps them onto the activities by correlation id. Pure code, tested
// without a GPU.
#include <cstdint>
#include <span>
#include <unordered_map>

#include "profiler/gpu_activity.h"

namespace ts::profiler {

inline uint64_t pack_op(StringId layer, StringId op) { return (static_cast<uint64_t>(layer) << 32) | op; }
inline uint64_t pack_iteration(int32_t iteration, Pass pass) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(iteration)) << 2) | static_cast<uint64_t>(pass);
}
inline StringId unpack_layer(uint64_t id) { return static_cast<StringId>(id >> 32); }
inline StringId unpack_op(uint64_t id) { return static_cast<StringId>(id & 0xffffffffU); }
inline int32_t unpack_iteration(uint64_t id) { return static_cast<int32_t>(static_cast<uint32_t>(id >> 2)); }
inline Pass unpack_pass(uint64_t id) { return static_cast<Pass>(id & 3U); }

// CUPTI correlation id -> the external id on top when that API call was made.
using ExternalIds = std::unordered_map<uint32_t, uint64_t>;

// The ids the launches had, one map per kind: `ops` holds pack_op(layer, op) of the innermost
// op, `iterations` pack_iteration(iteration, pass) of the innermost op, iteration or
// communication range; a launch in `comm` was made in a communication range (the value, which
// packs the range's label and name as pack_op does, is not read).
struct LaunchIds {
  const ExternalIds& ops;
  const ExternalIds& iterations;
  const ExternalIds& comm;
};

// Sets layer, op, pass and iteration of every activity whose correlation id has external ids,
// and makes every kernel, copy and set launched from a communication range kind comm (what it
// was stays in comm_work). Returns how many device activities (kernels, copies, sets,
// communication) had no op: launched outside any op.
uint64_t attribute_launches(std::span<GpuActivity> activities, const LaunchIds& ids);

}  // namespace ts::profiler
