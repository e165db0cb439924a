#include "distributed/nccl_rank.h"

#include <algorithm>
#include <array>
#include <climits>
#include <stdexcept>

#include "distributed/error.h"
#include "distributed/mpi_check.h"
#include "distributed/mpi_communicator.h"

#ifdef TS_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "distributed/nccl_communicator.h"
#endif

namespace ts::distributed {

// Every rank learns whether any rank was refused, and the first refused rank's reason.
void agree_on_gpus(MPI_Comm bootstrap, const GpuAssignment& mine) {
  int rank = 0;
  TS_MPI_CHECK(MPI_Comm_rank(bootstrap, &rank));
  const int candidate = mine.refused() ? rank : INT_MAX;
  int first_refused = INT_MAX;
  TS_MPI_CHECK(MPI_Allreduce(&candidate, &first_refused, 1, MPI_INT, MPI_MIN, bootstrap));
  if (first_refused == INT_MAX) return;
  std::array<char, 512> why{};
  if (rank == first_refused) mine.refusal.copy(why.data(), why.size() - 1);
  TS_MPI_CHECK(MPI_Bcast(why.data(), static_cast<int>(why.size()), MPI_CHAR, first_refused, bootstrap));
  throw DistError("rank " + std::to_string(first_refused) + ": " + why.data());
}

GradientLink gradient_link(MPI_Comm bootstrap, GpuGradients asked, int local_rank, int local_size, int pinned) {
  GradientLink link;
  if (asked == GpuGradients::host) {  // every rank was asked the same: nothing to agree on
    link.route = route_gpu_gradients(asked, "");
    link.communicator = std::make_unique<MpiCommunicator>(bootstrap);
    return link;
  }
  GpuAssignment mine;
  const std::string missing = nccl_unavailable_reason();
  if (missing.empty()) mine = nccl_gpu_for_rank(local_rank, local_size, local_gpu_count(), pinned);
  else mine.refusal = missing;
  std::string refusal;  // the first refused rank's, the same on every rank
  try {
    agree_on_gpus(bootstrap, mine);
  } catch (const DistError& e) {
    refusal = e.what();
  }
  link.route = route_gpu_gradients(asked, refusal);  // throws on every rank alike
#ifdef TS_HAVE_CUDA
  if (link.route.nccl) link.communicator = std::make_unique<NcclCommunicator>(bootstrap, mine.device);
#endif
  if (!link.communicator) link.communicator = std::make_unique<MpiCommunicator>(bootstrap);
  return link;
}

#ifdef TS_HAVE_CUDA

int local_gpu_count() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess ? devices : 0;
}

std::string nccl_unavailable_reason() {
  return local_gpu_count() > 0 ? std::string() : "NCCL needs a GPU per rank; this machine has none that CUDA can use";
}

NcclRank nccl_rank(MPI_Comm bootstrap, int local_rank, int local_size) {
  GpuAssignment gpu = gpu_for_rank(local_rank, local_size, local_gpu_count());
  if (gpu.refused()) gpu.refusal += ", or use --backend mpi (host memory)";
  agree_on_gpus(bootstrap, gpu);
  NcclRank r;
  r.communicator = std::make_unique<NcclCommunicator>(bootstrap, gpu.device);
  r.memory = cuda_memory(gpu.device);
  return r;
}

#else

int local_gpu_count() { return 0; }

std::string nccl_unavailable_reason() {
  return "NCCL needs a CUDA build (configure with -DTS_CUDA=ON where nvcc, cuDNN, CUPTI and NCCL are "
         "installed; see docs/gpu-machine.md)";
}

NcclRank nccl_rank(MPI_Comm bootstrap, int local_rank, int local_size) {
  GpuAssignment none;
  none.refusal = nccl_unavailable_reason();
  (void)local_rank;
  (void)local_size;
  agree_on_gpus(bootstrap, none);
  throw std::logic_error("unreachable: a build without CUDA refuses every rank");
}

#endif

}  // namespace ts::distributed
