#ifdef TS_HAVE_CUDA
// The collectives benchmark's buffers on a GPU, for the NCCL backend. The set and the copies go
// on the legacy default stream, which a non-blocking stream such as the NCCL communicator's does
// not wait for (and a copy from pageable memory may return before its DMA ends): every call
// waits for the device before it returns, so the collective that follows reads what was written.
#include <cuda_runtime.h>

#include <string>

#include "distributed/collective_bench.h"
#include "distributed/error.h"

namespace ts::distributed {

namespace {

void check(cudaError_t r, const char* what) {
  if (r != cudaSuccess) throw DistError(std::string("CUDA call failed: ") + what + ": " + cudaGetErrorString(r));
}

class CudaMemory final : public BenchMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  void* allocate(size_t bytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    void* p = nullptr;
    check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    check(cudaMemset(p, 0, bytes ? bytes : 1), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after cudaMemset");
    return p;
  }
  void release(void* p) noexcept override { cudaFree(p); }
  void upload(void* to, const void* host, size_t bytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaMemcpy(to, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the upload");
  }
  void download(void* host, const void* from, size_t bytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before the download");
    check(cudaMemcpy(host, from, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
  }

 private:
  int device_;
};

}  // namespace

std::unique_ptr<BenchMemory> cuda_memory(int device) { return std::make_unique<CudaMemory>(device); }

}  // namespace ts::distributed
#endif
