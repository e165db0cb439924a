#include "engine/cuda/check.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace ts::engine::cuda {

namespace {

[[noreturn]] void raise(const char* library, const std::string& what, int code, const char* call, const char* file,
                        int line) {
  throw std::runtime_error(std::string(library) + " error " + std::to_string(code) + " (" + what + ") in " + call +
                           " at " + file + ":" + std::to_string(line));
}

}  // namespace

void throw_cuda_error(int code, const char* call, const char* file, int line) {
  const auto rc = static_cast<cudaError_t>(code);
  // The runtime also keeps a failed call's error as the thread's "last error", which the next
  // launch's cudaGetLastError() would report as its own: taken here, it is this call's alone.
  // (A sticky error, one that broke the context, stays whatever is done.)
  (void)cudaGetLastError();
  raise("CUDA", std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc), code, call, file, line);
}

void throw_cudnn_error(int code, const char* call, const char* file, int line) {
  std::string what = cudnnGetErrorString(static_cast<cudnnStatus_t>(code));
  // cuDNN 9 keeps a more specific message for the last error of this thread.
  char detail[1024] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0] != '\0') what += std::string("; ") + detail;
  raise("cuDNN", what, code, call, file, line);
}

void throw_cublas_error(int code, const char* call, const char* file, int line) {
  const auto st = static_cast<cublasStatus_t>(code);
  raise("cuBLAS", std::string(cublasGetStatusName(st)) + ": " + cublasGetStatusString(st), code, call, file, line);
}

}  // namespace ts::engine::cuda
