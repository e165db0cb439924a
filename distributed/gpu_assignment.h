#pragma once
// Which GPU a rank of a GPU job uses, decided before any NCCL call: NCCL takes one GPU per rank
// and refuses two ranks of one communicator on one GPU ("Duplicate GPU"), so a host with fewer
// GPUs than ranks is refused here, with a message that says what to do instead, and never left
// to hang or fail inside ncclCommInitRank. No CUDA here: the caller counts the GPUs.
#include <optional>
#include <string>
#include <string_view>

namespace ts::distributed {

struct GpuAssignment {
  int device = -1;      // the GPU's index on this host, or -1 when refused
  std::string refusal;  // why not, when refused
  bool refused() const { return device < 0; }
};

// Rank `local_rank` of the `local_size` ranks on a host that has `gpus` GPUs: GPU local_rank
// when every local rank has a GPU of its own.
GpuAssignment gpu_for_rank(int local_rank, int local_size, int gpus);

// The GPU a rank uses when its gradients go through the host (ranks may share a GPU there): the
// host's local ranks spread over its `gpus` GPUs in turn (local rank 3 of a host with 2: GPU 1).
// -1 when the host has none.
int shared_gpu_for_rank(int local_rank, int gpus);

// A GPU for NCCL when a run names its GPU (`pinned`, cuda:N: every rank of the host on that one)
// or lets the ranks spread (`pinned` -1: GPU local_rank), refused where two of the host's ranks
// would share one.
GpuAssignment nccl_gpu_for_rank(int local_rank, int local_size, int gpus, int pinned);

// How a data-parallel GPU model's gradients travel between ranks (--gpu-gradients): `automatic`
// takes NCCL where every rank has a GPU of its own and the host otherwise.
enum class GpuGradients { automatic, nccl, host };
std::string_view to_string(GpuGradients g);  // "auto" | "nccl" | "host"
std::optional<GpuGradients> parse_gpu_gradients(std::string_view s);

struct GradientRoute {
  bool nccl = false;  // buckets in GPU memory through NCCL; else pinned host buckets through MPI
  std::string why;    // the choice in words, for the run's notice and its stored environment
};
// The route for `asked`, given the first refusal among the job's ranks (`refusal`, empty when
// every rank has a GPU of its own and NCCL is built). DistError when NCCL was asked for and
// cannot work, naming why and what to do instead.
GradientRoute route_gpu_gradients(GpuGradients asked, const std::string& refusal);

// The refusals say what NCCL needs, not what else to use: the benchmark's is --backend mpi, a
// training run's --gpu-gradients host.
//
// The same refusal for a launch planned on one host, before mpirun starts anything; empty when
// `ranks` ranks fit on `gpus` GPUs.
std::string gpus_too_few(int ranks, int gpus);

}  // namespace ts::distributed
