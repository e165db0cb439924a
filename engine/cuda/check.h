#pragma once
// One checking macro per library (docs/design.md, "Conventions"): a failed call throws
// std::runtime_error naming the call, where it was made and the library's own words.
// The macros need the library's header in the including file (cuda_runtime_api.h, cudnn.h,
// cublas_v2.h); the throwing functions live in check.cpp.

namespace ts::engine::cuda {

[[noreturn]] void throw_cuda_error(int code, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int code, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(int code, const char* call, const char* file, int line);

}  // namespace ts::engine::cuda

#define TS_CUDA_CHECK(expr)                                                                           \
  do {                                                                                                \
    const cudaError_t ts_cuda_rc_ = (expr);                                                           \
    if (ts_cuda_rc_ != cudaSuccess) {                                                                 \
      ::ts::engine::cuda::throw_cuda_error(static_cast<int>(ts_cuda_rc_), #expr, __FILE__, __LINE__); \
    }                                                                                                 \
  } while (0)

#define TS_CUDNN_CHECK(expr)                                                                            \
  do {                                                                                                  \
    const cudnnStatus_t ts_cudnn_rc_ = (expr);                                                          \
    if (ts_cudnn_rc_ != CUDNN_STATUS_SUCCESS) {                                                         \
      ::ts::engine::cuda::throw_cudnn_error(static_cast<int>(ts_cudnn_rc_), #expr, __FILE__, __LINE__); \
    }                                                                                                   \
  } while (0)

#define TS_CUBLAS_CHECK(expr)                                                                             \
  do {                                                                                                    \
    const cublasStatus_t ts_cublas_rc_ = (expr);                                                          \
    if (ts_cublas_rc_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      ::ts::engine::cuda::throw_cublas_error(static_cast<int>(ts_cublas_rc_), #expr, __FILE__, __LINE__); \
    }                                                                                                     \
  } while (0)
