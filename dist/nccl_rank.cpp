#include "dist/nccl_rank.h"

#include <stdexcept>

#ifdef TS_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "dist/nccl_communicator.h"
#endif

namespace ts::dist {

#ifdef TS_HAVE_CUDA

namespace {

int gpu_count() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess ? devices : 0;
}

}  // namespace

std::string nccl_unavailable_reason() {
  return gpu_count() > 0 ? std::string() : "--backend nccl needs a GPU per rank; this machine has none that CUDA can use";
}

NcclRank nccl_rank(MPI_Comm bootstrap, int local_rank) {
  const int devices = gpu_count();
  if (devices == 0) throw std::runtime_error("no usable GPU");
  const int device = local_rank % devices;
  NcclRank r;
  r.communicator = std::make_unique<NcclCommunicator>(bootstrap, device);
  r.memory = cuda_memory(device);
  return r;
}

#else

std::string nccl_unavailable_reason() {
  return "--backend nccl needs a CUDA build (configure with -DTS_CUDA=ON where nvcc, cuDNN, CUPTI and NCCL are "
         "installed; see docs/gpu-machine.md)";
}

NcclRank nccl_rank(MPI_Comm, int) { throw std::runtime_error(nccl_unavailable_reason()); }

#endif

}  // namespace ts::dist
