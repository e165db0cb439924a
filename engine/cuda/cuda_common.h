#pragma once
// Internal to engine/cuda/: what the CudaBackend's source files share: the backend's state,
// RAII wrappers of cuDNN descriptors, argument checks and small tensor helpers.
#include <cudnn.h>

#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/cuda/check.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_kernels.h"
#include "engine/cuda/device_context.h"
#include "engine/cuda/reduce_kernels.h"  // the reductions every family uses

namespace ts::engine::cuda {

struct ConvPlan;

struct CudaBackend::Impl {
  explicit Impl(int d) : device(d) {}
  int device;
  // Made on first use, not at construction: backend_for() hands out backends cheaply.
  DeviceContext& context() {
    std::call_once(context_once, [this] { ctx = &DeviceContext::get(device); });
    return *ctx;
  }
  std::mutex plans_mutex;
  std::unordered_map<std::string, std::shared_ptr<ConvPlan>> conv_plans;
  // How the plans were made (engine/autotune.h): counted when made, never reset (clear_cache
  // drops plans, not history).
  std::atomic<int64_t> plans_searched{0}, plans_heuristic{0}, searched_while_off{0}, heuristic_while_off{0};

 private:
  std::once_flag context_once;
  DeviceContext* ctx = nullptr;
};

// What every backend method starts with: the device made current and its stream.
struct Env {
  explicit Env(CudaBackend::Impl& im) : ctx(im.context()), guard(im.device), stream(ctx.stream()) {}
  DeviceContext& ctx;
  DeviceGuard guard;
  cudaStream_t stream;
};

// --- cuDNN descriptors (RAII) ---
class TensorDesc {
 public:
  TensorDesc() { TS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() { TS_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() { TS_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

// An NCHW fp32 descriptor; dimensions must fit cuDNN's int.
void set_nchw(const TensorDesc& d, int64_t n, int64_t c, int64_t h, int64_t w, const char* op);

// --- checks ---
[[noreturn]] inline void fail(const char* op, const std::string& msg) {
  throw std::invalid_argument(std::string(op) + ": " + msg);
}
// Both on cuda:`device`, of one shape.
void check_same(const Tensor& a, const Tensor& b, int device, const char* op);
// Defined, on cuda:`device`, plain and of rank `rank` (0: any).
void check_plain(const Tensor& t, int device, const char* op, const char* what, int64_t rank);
// Plain, on cuda:`device`, of rank `rank` (< 0: any).
bool usable_plain(const Tensor& t, int device, int64_t rank);
void check_plain_2d(const Tensor& t, int device, const char* op);
// Defined, on cuda:`device`.
void check_on(const Tensor& t, int device, const char* op, const char* what);
// check_on plus 1-D [c], plain.
void check_channel_vec(const Tensor& t, int device, int64_t c, const char* op, const char* what);
// A size that a library or kernel takes as int.
int to_int(int64_t v, const char* op, const char* what);

// --- tensors ---
// Channel-blocked with channels past C (padding that holds zeros).
bool has_padded_channels(const Tensor& t);
// `x` in `layout` (shares storage when it already is there).
Tensor in_layout(CudaBackend& b, const Tensor& x, const Layout& layout);
// A device tensor's values on the host (a synchronous copy).
std::vector<float> to_host(const Tensor& t, int device);
inline Device cuda_device(int device) { return Device{DeviceType::cuda, device}; }
// `t` in plain layout (shares storage when it already is).
Tensor as_plain(CudaBackend& b, const Tensor& t);
// A temporary of at least `bytes` on the device, category workspace.
Tensor workspace_tensor(int64_t bytes, int device);
kernels::Layout4 layout4(const Layout& l);
// [N, C, H, W] or [N, C] (as [N, C, 1, 1]).
Shape nchw_shape(const Shape& s, const char* op);

}  // namespace ts::engine::cuda
