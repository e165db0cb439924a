#pragma once
// Internal to engine/cuda/: the per-device state every CUDA kernel and library call uses.
// One context per device index, made on first use: the stream all of the engine's work on
// that device is queued on, the cuDNN and cuBLAS handles bound to it, and a mutex because
// neither library's handle may be used by two host threads at once.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <mutex>
#include <string>

#include "engine/tensor.h"

namespace ts::engine::cuda {

// Makes `device` current for the scope and restores the previous device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

class DeviceContext {
 public:
  // The context of cuda:`device`; std::runtime_error when the device is not usable.
  // Contexts live until the process ends (see device_context.cpp for why).
  static DeviceContext& get(int device);

  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  // The cuBLAS handle, its math mode set from tf32_allowed() on every call.
  cublasHandle_t cublas();
  std::mutex& library_mutex() { return library_mutex_; }
  const cudaDeviceProp& properties() const { return props_; }
  int multiprocessors() const { return props_.multiProcessorCount; }

 private:
  explicit DeviceContext(int device);

  int device_;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::mutex library_mutex_;
  // cuBLAS's workspace comes from our allocator (category workspace) so that the books stay
  // complete; made on the first GEMM, since the allocator needs this context's stream.
  std::shared_ptr<Storage> cublas_workspace_;
};

}  // namespace ts::engine::cuda
