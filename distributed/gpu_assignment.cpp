#include "distributed/gpu_assignment.h"

#include <fmt/format.h>

#include "distributed/error.h"

namespace ts::distributed {

std::string gpus_too_few(int ranks, int gpus) {
  if (gpus <= 0) return "NCCL needs a GPU per rank; this host has none that CUDA can use";
  if (ranks <= gpus) return {};
  return fmt::format("{} ranks on a host with {} GPU{}: NCCL takes one GPU per rank and refuses two ranks on one GPU "
                     "(\"Duplicate GPU\"); run at most {} rank{} per host",
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

GpuAssignment nccl_gpu_for_rank(int local_rank, int local_size, int gpus, int pinned) {
  if (pinned < 0) return gpu_for_rank(local_rank, local_size, gpus);
  GpuAssignment a;
  if (pinned >= gpus) {
    a.refusal = fmt::format("GPU {} was named, and this host has {} that CUDA can use", pinned, gpus);
  } else if (local_size > 1) {
    a.refusal = fmt::format("cuda:{} puts this host's {} ranks on one GPU, which NCCL refuses (\"Duplicate GPU\")",
                            pinned, local_size);
  } else {
    a.device = pinned;
  }
  return a;
}

std::string_view to_string(GpuGradients g) {
  switch (g) {
    case GpuGradients::automatic: return "auto";
    case GpuGradients::nccl: return "nccl";
    case GpuGradients::host: return "host";
  }
  return "auto";
}

std::optional<GpuGradients> parse_gpu_gradients(std::string_view s) {
  for (GpuGradients g : {GpuGradients::automatic, GpuGradients::nccl, GpuGradients::host}) {
    if (s == to_string(g)) return g;
  }
  return std::nullopt;
}

GradientRoute route_gpu_gradients(GpuGradients asked, const std::string& refusal) {
  if (asked == GpuGradients::host) {
    return {false,
            "through the host as asked (--gpu-gradients host): GPU to pinned host buckets, MPI all-reduce, back"};
  }
  if (refusal.empty()) {
    return {true, "through NCCL on each rank's GPU (buckets in GPU memory, a communication stream per rank)"};
  }
  if (asked == GpuGradients::nccl) {
    throw DistError("--gpu-gradients nccl cannot work here: " + refusal +
                    "; --gpu-gradients host (or auto) averages them through the host instead");
  }
  return {false, "through the host (GPU to pinned host buckets, MPI all-reduce, back), since NCCL cannot: " + refusal};
}

}  // namespace ts::distributed
