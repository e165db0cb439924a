#pragma once
// NCCL for the collectives benchmark, declared in every build so that its callers need no build
// switch: why a rank cannot use it here, and a rank's communicator and GPU memory where it can
// (NcclCommunicator and cuda_memory, built only with CUDA).
#include <memory>
#include <string>

#include <mpi.h>

#include "dist/collective_bench.h"
#include "dist/communicator.h"

namespace ts::dist {

// Empty when this build has CUDA and this machine a GPU that CUDA can use; the reason otherwise.
std::string nccl_unavailable_reason();

struct NcclRank {
  std::unique_ptr<Communicator> communicator;
  std::unique_ptr<BenchMemory> memory;   // the GPU's, for the benchmark's buffers
};
// A communicator over `bootstrap` on GPU local_rank % (the machine's GPUs);
// std::runtime_error with nccl_unavailable_reason() when there is none.
NcclRank nccl_rank(MPI_Comm bootstrap, int local_rank);

}  // namespace ts::dist
