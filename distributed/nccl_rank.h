#pragma once
// NCCL for the collectives benchmark, declared in every build so that its callers need no build
// switch: why a rank cannot use it here, and a rank's communicator and GPU memory where it can
// (NcclCommunicator and cuda_memory, built only with CUDA).
#include <memory>
#include <string>

#include <mpi.h>

#include "distributed/collective_bench.h"
#include "distributed/communicator.h"
#include "distributed/gpu_assignment.h"

namespace ts::distributed {

// Empty when this build has CUDA and this machine a GPU that CUDA can use; the reason otherwise.
std::string nccl_unavailable_reason();
// The GPUs CUDA can use on this host; 0 without CUDA or a driver.
int local_gpu_count();

// Collective over `bootstrap`: returns when no rank's GPU was refused; otherwise every rank
// throws DistError naming the first refused rank and its reason (so that none waits in NCCL for
// the others).
void agree_on_gpus(MPI_Comm bootstrap, const GpuAssignment& mine);

// The gradients' communicator of a data-parallel run whose model is on a GPU (collective over
// `bootstrap`): NCCL on this rank's GPU, or MPI over pinned host buckets, as route_gpu_gradients
// chooses from what every rank can do; `pinned`: the GPU the run named (cuda:N), -1 when the
// ranks spread over their hosts' GPUs. DistError, on every rank, when NCCL was asked for and
// some rank cannot use it.
struct GradientLink {
  std::unique_ptr<Communicator> communicator;
  GradientRoute route;
};
GradientLink gradient_link(MPI_Comm bootstrap, GpuGradients asked, int local_rank, int local_size, int pinned);

struct NcclRank {
  std::unique_ptr<Communicator> communicator;
  std::unique_ptr<BenchMemory> memory;  // the GPU's, for the benchmark's buffers
};
// A communicator over `bootstrap` on GPU `local_rank` of this host (gpu_assignment.h). Collective
// over `bootstrap`: when any rank's host has fewer GPUs than ranks, every rank throws DistError
// with that host's refusal, before NCCL is called (NCCL would refuse "Duplicate GPU", or hang).
NcclRank nccl_rank(MPI_Comm bootstrap, int local_rank, int local_size);

}  // namespace ts::distributed
