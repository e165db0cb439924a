// The pool family on the CPU: max and average pooling on oneDNN, in whatever layout the input
// has; nearest upsampling as plain loops over the storage, which keep the layout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/dnnl_common.h"
#include "engine/cpu/dnnl_primitives.h"

namespace ts::engine::cpu {

namespace {

using dnnl::algorithm;

struct PoolGeom {
  memory::dims src, dst, strides, kernel, pad_l, pad_r;
};

PoolGeom pool_geom(const Shape& x, const Pool2dParams& p, const char* op) {
  if (x.size() != 4) throw std::invalid_argument(std::string(op) + ": expected a 4-D input, got " + shape_str(x));
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0 ||
      p.pad_h * 2 > p.kernel_h || p.pad_w * 2 > p.kernel_w) {
    throw std::invalid_argument(std::string(op) +
                                ": bad kernel/stride/padding (padding must be at most half the kernel)");
  }
  const int64_t oh = conv_out_size(x[2], p.kernel_h, p.stride_h, p.pad_h, 1);
  const int64_t ow = conv_out_size(x[3], p.kernel_w, p.stride_w, p.pad_w, 1);
  PoolGeom g;
  g.src = {x[0], x[1], x[2], x[3]};
  g.dst = {x[0], x[1], oh, ow};
  g.strides = {p.stride_h, p.stride_w};
  g.kernel = {p.kernel_h, p.kernel_w};
  g.pad_l = {p.pad_h, p.pad_w};
  auto rp = [](int64_t in, int64_t out, int64_t k, int64_t s, int64_t pl) {
    const int64_t r = (out - 1) * s + k - in - pl;
    return r < 0 ? int64_t{0} : r;
  };
  g.pad_r = {rp(x[2], oh, p.kernel_h, p.stride_h, p.pad_h), rp(x[3], ow, p.kernel_w, p.stride_w, p.pad_w)};
  return g;
}

algorithm avg_algo(const Pool2dParams& p) {
  return p.count_include_pad ? algorithm::pooling_avg_include_padding : algorithm::pooling_avg_exclude_padding;
}

struct PoolFwdEntry {
  dnnl::pooling_forward::primitive_desc pd;
  dnnl::pooling_forward prim;
  Layout out_layout;  // the primitive's dst is md_for(y_shape, out_layout)
  Shape y_shape;
};

struct PoolBwdEntry {
  dnnl::pooling_backward::primitive_desc pd;
  dnnl::pooling_backward prim;
  Reorder dy;  // the caller's dy layout -> the forward's dst md
};

dnnl_pd::PoolDescs pool_descs(const PoolGeom& g, const md& src, const md& dst, algorithm a) {
  return {a, src, dst, g.strides, g.kernel, g.pad_l, g.pad_r};
}

std::shared_ptr<PoolFwdEntry> pool_fwd_entry(CpuBackend::Impl& im, const Shape& x, const Layout& xl,
                                             const Pool2dParams& p, algorithm a, const char* op) {
  return im.get<PoolFwdEntry>(Key("pool_fwd") << x << xl << p << static_cast<int64_t>(a), [&] {
    const PoolGeom g = pool_geom(x, p, op);
    const Shape ys(g.dst.begin(), g.dst.end());
    // Pooling keeps the input's layout.
    const auto pd = dnnl_pd::pool_forward(im.eng, pool_descs(g, md_for(x, xl), md_for(ys, xl), a));
    return std::make_shared<PoolFwdEntry>(PoolFwdEntry{pd, dnnl::pooling_forward(pd), xl, ys});
  });
}

std::shared_ptr<PoolBwdEntry> pool_bwd_entry(CpuBackend::Impl& im, const Shape& dy_shape, const Layout& dyl,
                                             const Shape& x, const Layout& xl, const Pool2dParams& p, algorithm a,
                                             const char* op) {
  return im.get<PoolBwdEntry>(Key("pool_bwd") << dy_shape << dyl << x << xl << p << static_cast<int64_t>(a), [&] {
    const PoolGeom g = pool_geom(x, p, op);
    const Shape ys(g.dst.begin(), g.dst.end());
    if (ys != dy_shape) {
      throw std::invalid_argument(std::string(op) + ": dy " + shape_str(dy_shape) + " does not match output " +
                                  shape_str(ys));
    }
    const dnnl_pd::PoolDescs descs = pool_descs(g, md_for(x, xl), md_for(ys, xl), a);
    const auto pd = dnnl_pd::pool_backward(im.eng, descs, dnnl_pd::pool_forward(im.eng, descs));
    auto e = std::make_shared<PoolBwdEntry>(PoolBwdEntry{pd, dnnl::pooling_backward(pd), Reorder()});
    e->dy = Reorder(im.eng, md_for(dy_shape, dyl), md_for(ys, xl));
    return e;
  });
}

// A 4-D tensor's storage as [outer][H][W][vec]: plain is (N C, H, W, 1), channels-last
// (N, H, W, C), channel-blocked (N C/b, H, W, b). Spatial ops then never reorder.
struct SpatialView {
  int64_t outer, h, w, vec;
};

SpatialView spatial_view(const Tensor& t, const char* op) {
  if (t.dim() != 4) throw std::invalid_argument(std::string(op) + ": needs [N, C, H, W], got " + shape_str(t.shape()));
  const int64_t n = t.size(0), c = t.size(1), h = t.size(2), w = t.size(3);
  switch (t.layout().kind) {
    case Layout::Kind::plain: return {n * c, h, w, 1};
    case Layout::Kind::channels_last: return {n, h, w, c};
    case Layout::Kind::channel_blocked: {
      const int64_t b = t.layout().block;
      return {n * ((c + b - 1) / b), h, w, b};
    }
    case Layout::Kind::weights_blocked: break;  // weights are not images
  }
  throw std::invalid_argument(std::string(op) + ": no spatial view of a " + t.layout().str() + " tensor");
}

void check_factor(int64_t factor, const char* op) {
  if (factor < 1) throw std::invalid_argument(std::string(op) + ": factor must be >= 1, got " + std::to_string(factor));
}

}  // namespace

PoolResult CpuBackend::max_pool2d_forward(const Tensor& x, const Pool2dParams& p) {
  check_cpu(x, "max_pool2d");
  auto& im = *impl_;
  auto e = pool_fwd_entry(im, x.shape(), x.layout(), p, algorithm::pooling_max, "max_pool2d");
  PoolResult r;
  r.y = Tensor::empty(e->y_shape, x.device(), e->out_layout);
  const md ws = e->pd.workspace_desc();
  r.workspace = temp_buffer(ws.get_size(), vocabulary::Category::workspace);
  im.run(e->prim, {{DNNL_ARG_SRC, memory(e->pd.src_desc(), im.eng, x.data())},
                   {DNNL_ARG_DST, memory(e->pd.dst_desc(), im.eng, r.y.data())},
                   {DNNL_ARG_WORKSPACE, memory(ws, im.eng, r.workspace.data())},
                   {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}});
  return r;
}

Tensor CpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& workspace, const Shape& x_shape,
                                       const Layout& x_layout, const Pool2dParams& p) {
  check_cpu(dy, "max_pool2d_backward");
  check_cpu(workspace, "max_pool2d_backward");
  auto& im = *impl_;
  auto e =
      pool_bwd_entry(im, dy.shape(), dy.layout(), x_shape, x_layout, p, algorithm::pooling_max, "max_pool2d_backward");
  const md ws = e->pd.workspace_desc();
  if (static_cast<size_t>(workspace.nbytes()) < ws.get_size()) {
    throw std::invalid_argument("max_pool2d_backward: workspace too small for " + shape_str(x_shape));
  }
  Tensor dy_tmp;
  void* dyp = prepare(im, e->dy, dy, dy_tmp);
  Tensor dx = Tensor::empty(x_shape, dy.device(), x_layout);
  im.run(e->prim, {{DNNL_ARG_DIFF_DST, memory(e->pd.diff_dst_desc(), im.eng, dyp)},
                   {DNNL_ARG_DIFF_SRC, memory(e->pd.diff_src_desc(), im.eng, dx.data())},
                   {DNNL_ARG_WORKSPACE, memory(ws, im.eng, workspace.data())},
                   {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}});
  return dx;
}

Tensor CpuBackend::avg_pool2d_forward(const Tensor& x, const Pool2dParams& p) {
  check_cpu(x, "avg_pool2d");
  auto& im = *impl_;
  auto e = pool_fwd_entry(im, x.shape(), x.layout(), p, avg_algo(p), "avg_pool2d");
  Tensor y = Tensor::empty(e->y_shape, x.device(), e->out_layout);
  im.run(e->prim, {{DNNL_ARG_SRC, memory(e->pd.src_desc(), im.eng, x.data())},
                   {DNNL_ARG_DST, memory(e->pd.dst_desc(), im.eng, y.data())},
                   {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}});
  return y;
}

Tensor CpuBackend::avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Layout& x_layout,
                                       const Pool2dParams& p) {
  check_cpu(dy, "avg_pool2d_backward");
  auto& im = *impl_;
  auto e = pool_bwd_entry(im, dy.shape(), dy.layout(), x_shape, x_layout, p, avg_algo(p), "avg_pool2d_backward");
  Tensor dy_tmp;
  void* dyp = prepare(im, e->dy, dy, dy_tmp);
  Tensor dx = Tensor::empty(x_shape, dy.device(), x_layout);
  im.run(e->prim, {{DNNL_ARG_DIFF_DST, memory(e->pd.diff_dst_desc(), im.eng, dyp)},
                   {DNNL_ARG_DIFF_SRC, memory(e->pd.diff_src_desc(), im.eng, dx.data())},
                   {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}});
  return dx;
}

Tensor CpuBackend::upsample_nearest2d_forward(const Tensor& x, int64_t f) {
  check_cpu(x, "upsample_nearest2d");
  check_factor(f, "upsample_nearest2d");
  const SpatialView v = spatial_view(x, "upsample_nearest2d");
  Tensor y = Tensor::empty({x.size(0), x.size(1), x.size(2) * f, x.size(3) * f}, x.device(), x.layout());
  const float* s = x.data();
  float* d = y.data();
  const int64_t oh = v.h * f, ow = v.w * f, vec = v.vec;
#pragma omp parallel for collapse(2) if (v.outer * oh * ow * vec > kParallelThreshold)
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < oh; ++i) {
      const float* src = s + ((o * v.h + i / f) * v.w) * vec;
      float* dst = d + ((o * oh + i) * ow) * vec;
      for (int64_t j = 0; j < ow; ++j) std::memcpy(dst + j * vec, src + (j / f) * vec, sizeof(float) * vec);
    }
  }
  return y;
}

Tensor CpuBackend::upsample_nearest2d_backward(const Tensor& dy, int64_t f) {
  check_cpu(dy, "upsample_nearest2d_backward");
  check_factor(f, "upsample_nearest2d_backward");
  if (dy.dim() != 4 || dy.size(2) % f != 0 || dy.size(3) % f != 0) {
    throw std::invalid_argument("upsample_nearest2d_backward: " + shape_str(dy.shape()) +
                                " is not a multiple of the factor " + std::to_string(f));
  }
  Tensor dx = Tensor::empty({dy.size(0), dy.size(1), dy.size(2) / f, dy.size(3) / f}, dy.device(), dy.layout());
  const SpatialView v = spatial_view(dx, "upsample_nearest2d_backward");
  const float* g = dy.data();
  float* d = dx.data();
  const int64_t oh = v.h * f, ow = v.w * f, vec = v.vec;
#pragma omp parallel for collapse(2) if (v.outer * oh * ow * vec > kParallelThreshold)
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.h; ++i) {
      float* dst = d + ((o * v.h + i) * v.w) * vec;
      for (int64_t j = 0; j < v.w; ++j) {
        for (int64_t k = 0; k < vec; ++k) {
          float acc = 0.0f;
          for (int64_t a = 0; a < f; ++a) {
            const float* row = g + ((o * oh + i * f + a) * ow + j * f) * vec + k;
            for (int64_t b = 0; b < f; ++b) acc += row[b * vec];
          }
          dst[j * vec + k] = acc;
        }
      }
    }
  }
  return dx;
}

}  // namespace ts::engine::cpu
