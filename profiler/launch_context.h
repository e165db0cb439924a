#pragma once
// How a GPU launch learns which op, layer, pass and iteration made it. While an op runs, the
// GPU tracer pushes two CUPTI external correlation ids on the launching thread: one packs the
// layer and op names, the other the iteration and pass (the iteration alone is pushed for the
// whole iteration, so launches outside ops still get one). CUPTI reports, per API call, the
// ids that were on top; attribute_launches() maps them onto the activities by correlation id.
// Pure code, tested without a GPU.
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

// Sets layer, op, pass and iteration of every activity whose correlation id has external ids.
// Returns how many device activities (kernels, copies, sets) had no op: launched outside any op.
uint64_t attribute_launches(std::span<GpuActivity> activities, const ExternalIds& op_ids,
                            const ExternalIds& iteration_ids);

}  // namespace ts::profiler
