#ifdef TS_HAVE_CUDA
#include "distributed/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "distributed/error.h"
#include "distributed/mpi_check.h"

// Every NCCL and CUDA runtime return code of this file goes through these.
#define TS_NCCL_CHECK(call) ::ts::distributed::check_nccl((call), #call, __FILE__, __LINE__)
#define TS_DIST_CUDA_CHECK(call) ::ts::distributed::check_cuda_rt((call), #call, __FILE__, __LINE__)

namespace ts::distributed {

namespace {

void check_nccl(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess) return;
  throw DistError(std::string("NCCL call failed: ") + call + ": " + ncclGetErrorString(r) + " (" + file + ":" +
                  std::to_string(line) + ")");
}

void check_cuda_rt(cudaError_t r, const char* call, const char* file, int line) {
  if (r == cudaSuccess) return;
  throw DistError(std::string("CUDA call failed: ") + call + ": " + cudaGetErrorString(r) + " (" + file + ":" +
                  std::to_string(line) + ")");
}

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::f32: return ncclFloat32;
    case DataType::f64: return ncclFloat64;
    case DataType::i32: return ncclInt32;
    case DataType::i64: return ncclInt64;
    case DataType::u8: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

}  // namespace

struct NcclCommunicator::Handles {
  ncclComm_t comm = nullptr;
  cudaStream_t own = nullptr;     // made here
  cudaStream_t stream = nullptr;  // where calls queue: `own`, or the one queue_on named
  void* scratch = nullptr;        // one float for the barrier's all-reduce
};

NcclCommunicator::NcclCommunicator(MPI_Comm bootstrap, int device) : h_(std::make_unique<Handles>()), device_(device) {
  TS_MPI_CHECK(MPI_Comm_rank(bootstrap, &rank_));
  TS_MPI_CHECK(MPI_Comm_size(bootstrap, &size_));
  ncclUniqueId id{};
  if (rank_ == 0) TS_NCCL_CHECK(ncclGetUniqueId(&id));
  TS_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, bootstrap));
  TS_DIST_CUDA_CHECK(cudaSetDevice(device_));
  TS_DIST_CUDA_CHECK(cudaStreamCreateWithFlags(&h_->own, cudaStreamNonBlocking));
  h_->stream = h_->own;
  TS_DIST_CUDA_CHECK(cudaMalloc(&h_->scratch, sizeof(float)));
  TS_NCCL_CHECK(ncclCommInitRank(&h_->comm, size_, id, rank_));
}

NcclCommunicator::~NcclCommunicator() {
  if (h_->comm) ncclCommDestroy(h_->comm);
  if (h_->scratch) cudaFree(h_->scratch);
  if (h_->own) cudaStreamDestroy(h_->own);
}

void NcclCommunicator::queue_on(void* stream) {
  h_->stream = stream != nullptr ? static_cast<cudaStream_t>(stream) : h_->own;
}

void NcclCommunicator::do_all_reduce(void* data, size_t count, DataType type, ReduceOp op) {
  TS_DIST_CUDA_CHECK(cudaSetDevice(device_));
  TS_NCCL_CHECK(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), h_->comm, h_->stream));
  TS_DIST_CUDA_CHECK(cudaStreamSynchronize(h_->stream));
}

void NcclCommunicator::do_broadcast(void* data, size_t count, DataType type, int root) {
  TS_DIST_CUDA_CHECK(cudaSetDevice(device_));
  TS_NCCL_CHECK(ncclBroadcast(data, data, count, nccl_type(type), root, h_->comm, h_->stream));
  TS_DIST_CUDA_CHECK(cudaStreamSynchronize(h_->stream));
}

void NcclCommunicator::do_all_gather(const void* send, void* recv, size_t count, DataType type) {
  TS_DIST_CUDA_CHECK(cudaSetDevice(device_));
  TS_NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(type), h_->comm, h_->stream));
  TS_DIST_CUDA_CHECK(cudaStreamSynchronize(h_->stream));
}

void NcclCommunicator::do_reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  TS_DIST_CUDA_CHECK(cudaSetDevice(device_));
  TS_NCCL_CHECK(ncclReduceScatter(send, recv, count, nccl_type(type), nccl_op(op), h_->comm, h_->stream));
  TS_DIST_CUDA_CHECK(cudaStreamSynchronize(h_->stream));
}

void NcclCommunicator::do_barrier() {
  // NCCL has no barrier: a one-element all-reduce that every rank must reach serves as one.
  TS_DIST_CUDA_CHECK(cudaSetDevice(device_));
  TS_NCCL_CHECK(ncclAllReduce(h_->scratch, h_->scratch, 1, ncclFloat32, ncclSum, h_->comm, h_->stream));
  TS_DIST_CUDA_CHECK(cudaStreamSynchronize(h_->stream));
}

}  // namespace ts::distributed
#endif
