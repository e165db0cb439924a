#include "distributed/gpu_assignment.h"

#include <fmt/format.h>

namespace ts::distributed {

std::string gpus_too_few(int ranks, int gpus) {
  if (gpus <= 0) return "NCCL needs a GPU per rank; this host has none that CUDA can use";
  if (ranks <= gpus) return {};
  return fmt::format("{} ranks on a host with {} GPU{}: NCCL takes one GPU per rank and refuses two ranks on one GPU "
                     "(\"Duplicate GPU\"); run at most {} rank{} per host, or use --backend mpi (host memory)",
                     ranks, gpus, gpus == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s");
}

int shared_gpu_for_rank(int local_rank, int gpus) {
  if (gpus <= 0 || local_rank < 0) return -1;
  return local_rank % gpus;
}

GpuAssignment gpu_for_rank(int local_rank, int local_size, int gpus) {
  GpuAssignment a;
  if (local_rank < 0 || local_size < 1 || local_rank >= local_size) {
    a.refusal = fmt::format("local rank {} of {} is not a rank of this host", local_rank, local_size);
    return a;
  }
  a.refusal = gpus_too_few(local_size, gpus);
  if (a.refusal.empty()) a.device = local_rank;
  return a;
}

}  // namespace ts::distributed
