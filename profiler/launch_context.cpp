#include "profiler/launch_context.h"

namespace ts::profiler {

uint64_t attribute_launches(std::span<GpuActivity> activities, const LaunchIds& ids) {
  uint64_t outside = 0;
  for (GpuActivity& a : activities) {
    if (a.correlation == 0) continue;  // CUPTI's own records (overhead) and NVTX markers
    if (auto it = ids.iterations.find(a.correlation); it != ids.iterations.end()) {
      a.iteration = unpack_iteration(it->second);
      a.pass = unpack_pass(it->second);
    }
    // Where it was issued, not what it is called, makes it communication (docs/decisions.md).
    if (occupies_device(a.kind) && a.kind != GpuKind::comm && ids.comm.contains(a.correlation)) {
      a.comm_work = a.kind;
      a.kind = GpuKind::comm;
    }
    if (auto it = ids.ops.find(a.correlation); it != ids.ops.end()) {
      a.layer = unpack_layer(it->second);
      a.op = unpack_op(it->second);
    } else if (occupies_device(a.kind)) {
      ++outside;
    }
  }
  return outside;
}

}  // namespace ts::profiler
