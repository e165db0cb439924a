// CudaBackend: the registry of per-device backends, the shared helpers, and what is the
// backend's own: fill, copy and layout conversion.
#include "engine/cuda/cuda_backend.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/immortal.h"

namespace ts::engine::cuda {

// ---------------------------------------------------------------- registry

namespace {

struct Backends {
  std::mutex mutex;
  std::vector<std::unique_ptr<CudaBackend>> per_device;
};

}  // namespace

CudaBackend& cuda_backend(int device) {
  static Immortal<Backends> backends;
  std::string why;
  if (!device_usable(device, &why)) throw std::runtime_error(why);
  auto& b = backends.get();
  std::lock_guard<std::mutex> lock(b.mutex);
  if (b.per_device.size() <= static_cast<size_t>(device)) b.per_device.resize(static_cast<size_t>(device) + 1);
  auto& slot = b.per_device[static_cast<size_t>(device)];
  if (!slot) slot = std::make_unique<CudaBackend>(device);
  return *slot;
}

CudaBackend::CudaBackend(int device) : device_(device), impl_(std::make_unique<Impl>(device)) {}
CudaBackend::~CudaBackend() = default;

void CudaBackend::synchronize() {
  Env env(*impl_);
  TS_CUDA_CHECK(cudaStreamSynchronize(env.stream));
}

// ---------------------------------------------------------------- shared helpers

void set_nchw(const TensorDesc& d, int64_t n, int64_t c, int64_t h, int64_t w, const char* op) {
  TS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, to_int(n, op, "batch"),
                                            to_int(c, op, "channels"), to_int(h, op, "height"),
                                            to_int(w, op, "width")));
}

void check_on(const Tensor& t, int device, const char* op, const char* what) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": " + what + " is undefined");
  const Device d = t.device();
  if (d.type != DeviceType::cuda || d.index != device) {
    throw std::invalid_argument(std::string(op) + ": " + what + " is on " + d.str() +
                                ", expected cuda:" + std::to_string(device));
  }
}

void check_channel_vec(const Tensor& t, int device, int64_t c, const char* op, const char* what) {
  check_on(t, device, op, what);
  if (t.dim() != 1 || t.size(0) != c || !t.layout().is_plain()) {
    throw std::invalid_argument(std::string(op) + ": " + what + " " + shape_str(t.shape()) + " for " +
                                std::to_string(c) + " channels");
  }
}

int to_int(int64_t v, const char* op, const char* what) {
  if (v < 0 || v > INT_MAX) {
    throw std::invalid_argument(std::string(op) + ": " + what + " " + std::to_string(v) +
                                " does not fit the 32-bit size the CUDA libraries take");
  }
  return static_cast<int>(v);
}

Tensor as_plain(CudaBackend& b, const Tensor& t) { return t.layout().is_plain() ? t : b.to_layout(t, Layout::plain()); }

Tensor workspace_tensor(int64_t bytes, int device) {
  const int64_t n = (bytes + static_cast<int64_t>(sizeof(float)) - 1) / static_cast<int64_t>(sizeof(float));
  return Tensor::empty({n}, cuda_device(device), Layout::plain(), vocabulary::Category::workspace);
}

kernels::Layout4 layout4(const Layout& l) {
  switch (l.kind) {
    case Layout::Kind::plain: return {0, 0};
    case Layout::Kind::channels_last: return {1, 0};
    case Layout::Kind::channel_blocked: return {2, l.block};
    case Layout::Kind::weights_blocked:  // the CPU convolutions' weights only
      throw std::invalid_argument("CUDA kernels take no " + l.str() + " tensor");
  }
  throw std::logic_error("unknown layout");
}

Shape nchw_shape(const Shape& s, const char* op) {
  if (s.size() == 4) return s;
  if (s.size() == 2) return {s[0], s[1], 1, 1};
  throw std::invalid_argument(std::string(op) + ": expected [N, C, H, W] or [N, C], got " + shape_str(s));
}

void check_same(const Tensor& a, const Tensor& b, int device, const char* op) {
  check_on(a, device, op, "first operand");
  check_on(b, device, op, "second operand");
  if (a.shape() != b.shape()) {
    throw std::invalid_argument(std::string(op) + ": shapes differ: " + shape_str(a.shape()) + " vs " +
                                shape_str(b.shape()));
  }
}

bool has_padded_channels(const Tensor& t) {
  return t.layout().kind == Layout::Kind::channel_blocked && t.dim() >= 2 && t.size(1) % t.layout().block != 0;
}

Tensor in_layout(CudaBackend& b, const Tensor& x, const Layout& layout) {
  return x.layout() == layout ? x : b.to_layout(x, layout);
}

void check_plain(const Tensor& t, int device, const char* op, const char* what, int64_t rank) {
  check_on(t, device, op, what);
  if (!t.layout().is_plain() || (rank > 0 && t.dim() != rank)) {
    throw std::invalid_argument(std::string(op) + ": " + what + " must be plain " + std::to_string(rank) + "-D, got " +
                                shape_str(t.shape()) + " " + t.layout().str());
  }
}

bool usable_plain(const Tensor& t, int device, int64_t rank) {
  return t.defined() && t.device().type == DeviceType::cuda && t.device().index == device && t.layout().is_plain() &&
         (rank < 0 || t.dim() == rank);
}

void check_plain_2d(const Tensor& t, int device, const char* op) {
  if (!usable_plain(t, device, 2)) fail(op, "needs a plain 2-D tensor on cuda:" + std::to_string(device));
}

std::vector<float> to_host(const Tensor& t, int device) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  copy_to_host(v.data(), t.data(), v.size() * sizeof(float), device);
  return v;
}

// ---------------------------------------------------------------- memory and layout

void CudaBackend::fill(const Tensor& t, float value) {
  check_on(t, device_, "fill", "tensor");
  Env env(*impl_);
  if (has_padded_channels(t)) {
    int64_t inner = 1;
    for (int64_t d = 2; d < t.dim(); ++d) inner *= t.size(d);
    TS_CUDA_CHECK(kernels::fill_blocked(t.data(), t.size(0), t.size(1), inner, t.layout().block, value, env.stream));
    return;
  }
  TS_CUDA_CHECK(kernels::fill(t.data(), t.storage_numel(), value, env.stream));
}

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  check_same(src, dst, device_, "copy");
  Env env(*impl_);
  if (src.layout() == dst.layout()) {
    if (src.data() != dst.data()) {
      TS_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<size_t>(src.nbytes()), cudaMemcpyDeviceToDevice,
                                    env.stream));
    }
    return;
  }
  if (src.dim() != 4) throw std::invalid_argument("copy: layouts other than plain need a 4-D tensor");
  if (has_padded_channels(dst)) {
    TS_CUDA_CHECK(cudaMemsetAsync(dst.data(), 0, static_cast<size_t>(dst.nbytes()), env.stream));
  }
  TS_CUDA_CHECK(kernels::reorder4d(src.data(), layout4(src.layout()), dst.data(), layout4(dst.layout()), src.size(0),
                                   src.size(1), src.size(2), src.size(3), env.stream));
}

Tensor CudaBackend::to_layout(const Tensor& x, const Layout& layout) {
  check_on(x, device_, "to_layout", "x");
  if (x.layout() == layout) return x;
  if (x.dim() != 4) {
    throw std::invalid_argument("to_layout: layout " + layout.str() + " needs a 4-D tensor, got " +
                                shape_str(x.shape()));
  }
  if (layout.kind == Layout::Kind::channel_blocked && layout.block <= 0) {
    throw std::invalid_argument("to_layout: channel-blocked layout without a block size");
  }
  Tensor y = Tensor::empty(x.shape(), x.device(), layout);
  copy(x, y);
  return y;
}

// ---------------------------------------------------------------- concat / slice

}  // namespace ts::engine::cuda
