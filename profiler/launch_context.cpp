#include "profiler/launch_context.h"

namespace ts::profiler {

uint64_t attribute_launches(std::span<GpuActivity> activities, const ExternalIds& op_ids,
                            const ExternalIds& iteration_ids) {
  uint64_t outside = 0;
  for (GpuActivity& a : activities) {
    if (a.correlation == 0) continue;  // CUPTI's own records (overhead) and NVTX markers
    if (auto it = iteration_ids.find(a.correlation); it != iteration_ids.end()) {
      a.iteration = unpack_iteration(it->second);
      a.pass = unpack_pass(it->second);
    }
    if (auto it = op_ids.find(a.correlation); it != op_ids.end()) {
      a.layer = unpack_layer(it->second);
      a.op = unpack_op(it->second);
    } else if (occupies_device(a.kind)) {
      ++outside;
    }
  }
  return outside;
}

}  // namespace ts::profiler
