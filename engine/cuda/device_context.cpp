#include "engine/cuda/device_context.h"

#include <memory>
#include <vector>

#include "engine/cuda/check.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/immortal.h"

namespace ts::engine::cuda {

namespace {

// NVIDIA's recommendation for Hopper; cuBLAS would otherwise cudaMalloc its own, unseen.
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<DeviceContext>> contexts;
};

Registry& registry() {
  static Immortal<Registry> r;
  return r.get();
}

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  int current = -1;
  TS_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) {
    TS_CUDA_CHECK(cudaSetDevice(device));
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);  // a destructor must not throw
}

DeviceContext& DeviceContext::get(int device) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (device >= 0 && static_cast<size_t>(device) < r.contexts.size() && r.contexts[static_cast<size_t>(device)]) {
    return *r.contexts[static_cast<size_t>(device)];
  }
  std::string why;
  if (!device_usable(device, &why)) throw std::runtime_error(why);
  if (r.contexts.size() <= static_cast<size_t>(device)) r.contexts.resize(static_cast<size_t>(device) + 1);
  // The constructor is private: only this registry makes contexts.
  r.contexts[static_cast<size_t>(device)] = std::unique_ptr<DeviceContext>(new DeviceContext(device));
  return *r.contexts[static_cast<size_t>(device)];
}

DeviceContext::DeviceContext(int device) : device_(device) {
  DeviceGuard guard(device);
  try {
    TS_CUDA_CHECK(cudaGetDeviceProperties(&props_, device));
    // Non-blocking: no implicit synchronisation with the legacy default stream, which a
    // library might use behind our back; everything of ours is ordered on this stream.
    TS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TS_CUDNN_CHECK(cudnnCreate(&cudnn_));
    TS_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
    TS_CUBLAS_CHECK(cublasCreate(&cublas_));
    TS_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  } catch (...) {
    if (cublas_) cublasDestroy(cublas_);
    if (cudnn_) cudnnDestroy(cudnn_);
    if (stream_) cudaStreamDestroy(stream_);
    throw;
  }
}

DeviceContext::~DeviceContext() {
  // Only reached if a context is ever destroyed explicitly; errors are ignored (teardown).
  cublas_workspace_.reset();
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (stream_) cudaStreamDestroy(stream_);
}

cublasHandle_t DeviceContext::cublas() {
  if (!cublas_workspace_) {
    cublas_workspace_ = std::make_shared<Storage>(kCublasWorkspaceBytes, Device{DeviceType::cuda, device_},
                                                  vocabulary::Category::workspace, "cublas");
    TS_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_->data(), static_cast<size_t>(kCublasWorkspaceBytes)));
  }
  TS_CUBLAS_CHECK(cublasSetMathMode(cublas_, tf32_allowed() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return cublas_;
}

}  // namespace ts::engine::cuda
