#pragma once
// Which GPU a rank of a GPU job uses, decided before any NCCL call: NCCL takes one GPU per rank
// and refuses two ranks of one communicator on one GPU ("Duplicate GPU"), so a host with fewer
// GPUs than ranks is refused here, with a message that says what to do instead, and never left
// to hang or fail inside ncclCommInitRank. No CUDA here: the caller counts the GPUs.
#include <string>

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

// The same refusal for a launch planned on one host, before mpirun starts anything; empty when
// `ranks` ranks fit on `gpus` GPUs.
std::string gpus_too_few(int ranks, int gpus);

}  // namespace ts::distributed
