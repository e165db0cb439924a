// CpuBackend: construction, the oneDNN glue shared by every kernel, fill/copy/layout, and
// nearest upsampling (the op families have files of their own: cpu/<family>.cpp).
#include "engine/cpu/cpu_backend.h"

#include <omp.h>
#include <pmmintrin.h>
#include <xmmintrin.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "engine/context.h"
#include "engine/cpu/cpu_common.h"
#include "engine/cpu/dnnl_common.h"

namespace ts::engine::cpu {

// ---------------------------------------------------------------- init

void init_cpu_backend() {
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#pragma omp parallel
  {
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  }
}

CpuBackend::CpuBackend() : impl_(std::make_unique<Impl>()) { init_cpu_backend(); }
CpuBackend::~CpuBackend() = default;

CpuBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

CpuBackend::Impl& impl_of(CpuBackend& b) { return *b.impl_; }

size_t CpuBackend::cached_primitives() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->created;
}

void CpuBackend::clear_cache() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->cache.clear();
}

// ---------------------------------------------------------------- descriptors

memory::dims to_dims(const Shape& s) { return memory::dims(s.begin(), s.end()); }

md md_for(const Shape& shape, const Layout& layout) {
  const auto dims = to_dims(shape.empty() ? Shape{1} : shape);
  const size_t rank = dims.size();
  switch (layout.kind) {
    case Layout::Kind::plain: {
      memory::dims strides(rank, 1);
      for (size_t i = rank - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
      return md(dims, f32, strides);
    }
    case Layout::Kind::channels_last:
      if (rank != 4) throw std::invalid_argument("channels_last layout needs a 4-D tensor, got " + shape_str(shape));
      return md(dims, f32, tag::nhwc);
    case Layout::Kind::channel_blocked:
      if (rank != 4) throw std::invalid_argument("channel-blocked layout needs a 4-D tensor, got " + shape_str(shape));
      if (layout.block == 8) return md(dims, f32, tag::aBcd8b);
      if (layout.block == 16) return md(dims, f32, tag::aBcd16b);
      throw std::invalid_argument("unsupported channel block " + std::to_string(layout.block));
    case Layout::Kind::weights_blocked:
      if (rank != 4) throw std::invalid_argument("weights-blocked layout needs a 4-D tensor, got " + shape_str(shape));
      if (layout.block == 8) return md(dims, f32, tag::OIhw8i8o);
      if (layout.block == 16) return md(dims, f32, tag::OIhw16i16o);
      throw std::invalid_argument("unsupported weights block " + std::to_string(layout.block));
  }
  throw std::logic_error("unknown layout");
}

std::optional<Layout> layout_of(const md& d, const Shape& shape) {
  const Layout candidates[] = {Layout::plain(), Layout::channels_last(), Layout::blocked(8), Layout::blocked(16)};
  for (const Layout& l : candidates) {
    if (l.kind != Layout::Kind::plain && shape.size() != 4) continue;
    if (md_for(shape, l) == d) return l;
  }
  return std::nullopt;
}

Reorder::Reorder(const dnnl::engine& eng, const md& a, const md& b) : from(a), to(b) {
  if (!(a == b)) prim = dnnl::reorder(dnnl::reorder::primitive_desc(eng, a, eng, b));
}

std::shared_ptr<Reorder> CpuBackend::Impl::layout_reorder(const Shape& shape, const Layout& from, const Layout& to) {
  return get<Reorder>(Key("reorder") << shape << from << to,
                      [&] { return std::make_shared<Reorder>(eng, md_for(shape, from), md_for(shape, to)); });
}

void CpuBackend::Impl::primitive_reorder(const Reorder& r, void* src, void* dst) {
  static const auto name = op_name("reorder");
  OpScope scope(name, {profiler::WorkClass::reorder, 0, static_cast<int64_t>(r.from.get_size() + r.to.get_size())});
  reorder(r, src, dst);
}

void* prepare(CpuBackend::Impl& im, const Reorder& r, const Tensor& t, Tensor& temp) {
  if (!r.needed()) return t.data();
  temp = temp_buffer(r.to.get_size());
  im.primitive_reorder(r, t.data(), temp.data());
  return temp.data();
}

Tensor temp_buffer(size_t bytes, vocabulary::Category category) {
  const auto n = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  return Tensor::empty({n}, Device::cpu(), Layout::plain(), category);
}

memory CpuBackend::Impl::scratchpad(const md& d) {
  thread_local Tensor buffer;
  const size_t bytes = d.get_size();
  if (!buffer.defined() || static_cast<size_t>(buffer.nbytes()) < bytes) {
    buffer = Tensor();  // free the old one first
    buffer = temp_buffer(bytes, vocabulary::Category::workspace);
  }
  return memory(d, eng, buffer.data());
}

// ---------------------------------------------------------------- memory and layout

void CpuBackend::fill(const Tensor& t, float value) {
  check_cpu(t, "fill");
  float* p = t.data();
  const Layout& l = t.layout();
  if (l.kind == Layout::Kind::channel_blocked && t.size(1) % l.block != 0) {
    // Padded channels must stay zero.
    const int64_t b = l.block, c = t.size(1);
    const int64_t cb = (c + b - 1) / b;
    int64_t inner = 1;
    for (int64_t d = 2; d < t.dim(); ++d) inner *= t.size(d);
    const int64_t outer = t.size(0) * cb;
#pragma omp parallel for if (outer * inner * b > kParallelThreshold)
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t cblk = o % cb;
      float* q = p + o * inner * b;
      for (int64_t s = 0; s < inner; ++s) {
        for (int64_t k = 0; k < b; ++k) q[s * b + k] = (cblk * b + k < c) ? value : 0.0f;
      }
    }
    return;
  }
  parallel_for(t.storage_numel(), [=](int64_t i) { p[i] = value; });
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  check_same(src, dst, "copy");
  if (src.layout() == dst.layout()) {
    const float* s = src.data();
    float* d = dst.data();
    if (s != d) parallel_for(src.storage_numel(), [=](int64_t i) { d[i] = s[i]; });
    return;
  }
  auto r = impl_->layout_reorder(src.shape(), src.layout(), dst.layout());
  impl_->reorder(*r, src.data(), dst.data());
}

Tensor CpuBackend::to_layout(const Tensor& x, const Layout& layout) {
  check_cpu(x, "to_layout");
  if (x.layout() == layout) return x;
  // Physically identical arrangements (e.g. [N, C, 1, 1] blocked with C % block == 0 and
  // plain) only change the label: share the storage.
  if (x.dim() == 4 && x.size(2) == 1 && x.size(3) == 1) {
    auto same_as_plain = [&](const Layout& l) {
      return l.is_plain() || l.kind == Layout::Kind::channels_last ||
             (l.kind == Layout::Kind::channel_blocked && x.size(1) % l.block == 0);
    };
    if (same_as_plain(x.layout()) && same_as_plain(layout)) {
      Tensor y = x.detach();
      y.impl()->layout = layout;
      return y;
    }
  }
  auto r = impl_->layout_reorder(x.shape(), x.layout(), layout);
  if (!r->needed()) {
    // oneDNN finds the two descriptors equal (one channel: plain and channels-last are the
    // same bytes), so there is no primitive to run: relabel as above.
    Tensor y = x.detach();
    y.impl()->layout = layout;
    return y;
  }
  Tensor y = Tensor::empty(x.shape(), x.device(), layout);
  impl_->reorder(*r, x.data(), y.data());
  return y;
}

}  // namespace ts::engine::cpu
