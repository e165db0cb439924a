// The conv family on the CPU, on oneDNN: `any` formats everywhere so the primitive picks its
// layout (blocked on AVX2/AVX-512), inputs reordered only when theirs differs, gradients returned
// in the layout of what they are gradients of. Weights come plain OIHW (reordered per call) or in
// conv_weights_layout's OIhw16i16o, which forward and the weights gradient use as they are: a
// ResNet-50 step reorders its 100 MB of weights once (backward-data's transposed blocking), not
// three times.
#include <stdexcept>

#include "engine/cpu/dnnl_common.h"
#include "engine/cpu/dnnl_primitives.h"

namespace ts::engine::cpu {

namespace {

struct ConvGeom {
  memory::dims src, weights, bias, dst;
  memory::dims strides, dilates, pad_l, pad_r;
  memory::dims weights_plain_dims;  // [O, I/g, kh, kw] or [g, O/g, I/g, kh, kw]
  bool grouped = false;
};

int64_t right_pad(int64_t in, int64_t out, int64_t k, int64_t s, int64_t pad_l, int64_t dil) {
  const int64_t r = (out - 1) * s + (k - 1) * dil + 1 - in - pad_l;
  return r < 0 ? 0 : r;
}

ConvGeom conv_geom(const Shape& x, const Shape& w, const Conv2dParams& p) {
  if (x.size() != 4 || w.size() != 4) {
    throw std::invalid_argument("conv2d: expected 4-D input and weights, got " + shape_str(x) + " and " + shape_str(w));
  }
  const int64_t g = p.groups;
  if (g < 1 || x[1] % g != 0 || w[0] % g != 0 || w[1] * g != x[1]) {
    throw std::invalid_argument("conv2d: input " + shape_str(x) + " and weights " + shape_str(w) +
                                " do not match groups=" + std::to_string(g));
  }
  if (p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 || p.dilation_w < 1 || p.pad_h < 0 || p.pad_w < 0) {
    throw std::invalid_argument("conv2d: bad stride/dilation/padding");
  }
  const int64_t oh = conv_out_size(x[2], w[2], p.stride_h, p.pad_h, p.dilation_h);
  const int64_t ow = conv_out_size(x[3], w[3], p.stride_w, p.pad_w, p.dilation_w);
  ConvGeom c;
  c.src = {x[0], x[1], x[2], x[3]};
  c.grouped = g > 1;
  c.weights = c.grouped ? memory::dims{g, w[0] / g, w[1], w[2], w[3]} : memory::dims{w[0], w[1], w[2], w[3]};
  c.weights_plain_dims = c.weights;
  c.bias = {w[0]};
  c.dst = {x[0], w[0], oh, ow};
  c.strides = {p.stride_h, p.stride_w};
  c.dilates = {p.dilation_h - 1, p.dilation_w - 1};
  c.pad_l = {p.pad_h, p.pad_w};
  c.pad_r = {right_pad(x[2], oh, w[2], p.stride_h, p.pad_h, p.dilation_h),
             right_pad(x[3], ow, w[3], p.stride_w, p.pad_w, p.dilation_w)};
  return c;
}

md any_md(const memory::dims& d) { return md(d, f32, tag::any); }
md weights_plain_md(const ConvGeom& c) { return md(c.weights_plain_dims, f32, c.grouped ? tag::goihw : tag::oihw); }

// The weights tensor's own md: plain, or (ungrouped only) one of the engine's weights layouts.
md weights_md(const ConvGeom& c, const Shape& w, const Layout& wl) {
  if (wl.is_plain()) return weights_plain_md(c);
  if (c.grouped) throw std::invalid_argument("conv2d: grouped weights must be plain, got " + wl.str());
  return md_for(w, wl);
}

// `any` formats for the data and weights, so the primitive picks its layout; a plain bias.
dnnl_pd::ConvDescs descs(const ConvGeom& c, bool bias) {
  return {any_md(c.src),
          any_md(c.weights),
          bias ? md(c.bias, f32, tag::a) : md(),
          any_md(c.dst),
          c.strides,
          c.dilates,
          c.pad_l,
          c.pad_r};
}

dnnl_pd::ConvForward fwd_pd(const dnnl::engine& eng, const ConvGeom& c, bool bias) {
  return dnnl_pd::conv_forward(eng, descs(c, bias));
}

Shape dst_shape(const ConvGeom& c) { return Shape(c.dst.begin(), c.dst.end()); }

// Where a primitive's output goes: straight into a tensor of one of our layouts, or into a
// temporary that is reordered to `final_layout`.
struct OutputPlan {
  Layout layout;    // layout of the returned tensor
  Reorder reorder;  // from the primitive's md to md_for(shape, layout), when needed
};

OutputPlan plan_output(const dnnl::engine& eng, const md& produced, const Shape& shape, std::optional<Layout> wanted) {
  OutputPlan o;
  if (!wanted) {
    auto l = layout_of(produced, shape);
    o.layout = l ? *l : Layout::plain();
  } else {
    o.layout = *wanted;
  }
  o.reorder = Reorder(eng, produced, md_for(shape, o.layout));
  return o;
}

struct FwdEntry {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  Reorder src, weights;
  OutputPlan out;
  Shape y_shape;
};

struct BwdDataEntry {
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
  Reorder dy, weights;
  OutputPlan out;
};

struct BwdWeightsEntry {
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
  Reorder x, dy;
  Reorder dw;  // to the weights' layout
  md dbias_md;
};

std::shared_ptr<FwdEntry> fwd_entry(CpuBackend::Impl& im, const Shape& x, const Layout& xl, const Shape& w,
                                    const Layout& wl, bool bias, const Conv2dParams& p) {
  return im.get<FwdEntry>(Key("conv_fwd") << x << xl << w << wl << static_cast<int64_t>(bias) << p, [&] {
    const ConvGeom c = conv_geom(x, w, p);
    auto pd = fwd_pd(im.eng, c, bias);
    auto e = std::make_shared<FwdEntry>(FwdEntry{pd, dnnl::convolution_forward(pd), Reorder(), Reorder(), {}, {}});
    e->src = Reorder(im.eng, md_for(x, xl), pd.src_desc());
    e->weights = Reorder(im.eng, weights_md(c, w, wl), pd.weights_desc());
    e->y_shape = dst_shape(c);
    e->out = plan_output(im.eng, pd.dst_desc(), e->y_shape, std::nullopt);
    return e;
  });
}

std::shared_ptr<BwdDataEntry> bwd_data_entry(CpuBackend::Impl& im, const Shape& dy_shape, const Layout& dyl,
                                             const Shape& w, const Layout& wl, const Shape& x, const Layout& xl,
                                             const Conv2dParams& p) {
  return im.get<BwdDataEntry>(Key("conv_bwd_data") << dy_shape << dyl << w << wl << x << xl << p, [&] {
    const ConvGeom c = conv_geom(x, w, p);
    if (dst_shape(c) != dy_shape) {
      throw std::invalid_argument("conv2d_backward_data: dy " + shape_str(dy_shape) + " does not match output " +
                                  shape_str(dst_shape(c)));
    }
    auto hint = fwd_pd(im.eng, c, false);
    const auto pd = dnnl_pd::conv_backward_data(im.eng, descs(c, false), hint);
    auto e =
        std::make_shared<BwdDataEntry>(BwdDataEntry{pd, dnnl::convolution_backward_data(pd), Reorder(), Reorder(), {}});
    e->dy = Reorder(im.eng, md_for(dy_shape, dyl), pd.diff_dst_desc());
    e->weights = Reorder(im.eng, weights_md(c, w, wl), pd.weights_desc());
    e->out = plan_output(im.eng, pd.diff_src_desc(), x, xl);
    return e;
  });
}

std::shared_ptr<BwdWeightsEntry> bwd_weights_entry(CpuBackend::Impl& im, const Shape& x, const Layout& xl,
                                                   const Shape& dy_shape, const Layout& dyl, const Shape& w,
                                                   const Layout& wl, bool bias, const Conv2dParams& p) {
  return im.get<BwdWeightsEntry>(
      Key("conv_bwd_weights") << x << xl << dy_shape << dyl << w << wl << static_cast<int64_t>(bias) << p, [&] {
        const ConvGeom c = conv_geom(x, w, p);
        if (dst_shape(c) != dy_shape) {
          throw std::invalid_argument("conv2d_backward_weights: dy " + shape_str(dy_shape) + " does not match output " +
                                      shape_str(dst_shape(c)));
        }
        auto hint = fwd_pd(im.eng, c, bias);
        const auto pd = dnnl_pd::conv_backward_weights(im.eng, descs(c, bias), hint);
        auto e = std::make_shared<BwdWeightsEntry>(
            BwdWeightsEntry{pd, dnnl::convolution_backward_weights(pd), Reorder(), Reorder(), Reorder(), md()});
        e->x = Reorder(im.eng, md_for(x, xl), pd.src_desc());
        e->dy = Reorder(im.eng, md_for(dy_shape, dyl), pd.diff_dst_desc());
        e->dw = Reorder(im.eng, pd.diff_weights_desc(), weights_md(c, w, wl));
        if (bias) e->dbias_md = pd.diff_bias_desc();
        return e;
      });
}

// Allocates the output per plan; returns the pointer the primitive writes to.
void* output_target(const OutputPlan& o, const md& produced, const Shape& shape, Tensor& out, Tensor& temp) {
  out = Tensor::empty(shape, Device::cpu(), o.layout);
  if (!o.reorder.needed()) return out.data();
  temp = temp_buffer(produced.get_size());
  return temp.data();
}

void check_x(const Tensor& t, const char* op) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": undefined tensor");
  if (!t.device().is_cpu()) throw std::invalid_argument(std::string(op) + ": tensor on " + t.device().str());
}

}  // namespace

Tensor CpuBackend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dParams& p) {
  check_x(x, "conv2d");
  check_x(w, "conv2d");
  const bool has_bias = bias && bias->defined();
  if (has_bias && (bias->dim() != 1 || bias->size(0) != w.size(0) || !bias->layout().is_plain())) {
    throw std::invalid_argument("conv2d: bias " + shape_str(bias->shape()) + " for weights " + shape_str(w.shape()));
  }
  auto& im = *impl_;
  auto e = fwd_entry(im, x.shape(), x.layout(), w.shape(), w.layout(), has_bias, p);
  Tensor src_tmp, w_tmp, y, y_tmp;
  memory src(e->pd.src_desc(), im.eng, prepare(im, e->src, x, src_tmp));
  memory wm(e->pd.weights_desc(), im.eng, prepare(im, e->weights, w, w_tmp));
  memory dst(e->pd.dst_desc(), im.eng, output_target(e->out, e->pd.dst_desc(), e->y_shape, y, y_tmp));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                       {DNNL_ARG_WEIGHTS, wm},
                                       {DNNL_ARG_DST, dst},
                                       {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, memory(md({w.size(0)}, f32, tag::a), im.eng, bias->data()));
  im.run(e->prim, args);
  if (e->out.reorder.needed()) im.primitive_reorder(e->out.reorder, y_tmp.data(), y.data());
  return y;
}

Tensor CpuBackend::conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Layout& x_layout,
                                        const Conv2dParams& p) {
  check_x(dy, "conv2d_backward_data");
  check_x(w, "conv2d_backward_data");
  auto& im = *impl_;
  auto e = bwd_data_entry(im, dy.shape(), dy.layout(), w.shape(), w.layout(), x_shape, x_layout, p);
  Tensor dy_tmp, w_tmp, dx, dx_tmp;
  memory ddst(e->pd.diff_dst_desc(), im.eng, prepare(im, e->dy, dy, dy_tmp));
  memory wm(e->pd.weights_desc(), im.eng, prepare(im, e->weights, w, w_tmp));
  memory dsrc(e->pd.diff_src_desc(), im.eng, output_target(e->out, e->pd.diff_src_desc(), x_shape, dx, dx_tmp));
  im.run(e->prim, {{DNNL_ARG_DIFF_DST, ddst},
                   {DNNL_ARG_WEIGHTS, wm},
                   {DNNL_ARG_DIFF_SRC, dsrc},
                   {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}});
  if (e->out.reorder.needed()) im.primitive_reorder(e->out.reorder, dx_tmp.data(), dx.data());
  return dx;
}

WeightGrads CpuBackend::conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Shape& w_shape, bool bias,
                                                const Conv2dParams& p, const Layout& w_layout) {
  check_x(x, "conv2d_backward_weights");
  check_x(dy, "conv2d_backward_weights");
  auto& im = *impl_;
  auto e = bwd_weights_entry(im, x.shape(), x.layout(), dy.shape(), dy.layout(), w_shape, w_layout, bias, p);
  Tensor x_tmp, dy_tmp, dw_tmp;
  WeightGrads r;
  r.dw = Tensor::empty(w_shape, Device::cpu(), w_layout);
  memory src(e->pd.src_desc(), im.eng, prepare(im, e->x, x, x_tmp));
  memory ddst(e->pd.diff_dst_desc(), im.eng, prepare(im, e->dy, dy, dy_tmp));
  void* dw_ptr = r.dw.data();
  if (e->dw.needed()) {
    dw_tmp = temp_buffer(e->pd.diff_weights_desc().get_size());
    dw_ptr = dw_tmp.data();
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                       {DNNL_ARG_DIFF_DST, ddst},
                                       {DNNL_ARG_DIFF_WEIGHTS, memory(e->pd.diff_weights_desc(), im.eng, dw_ptr)},
                                       {DNNL_ARG_SCRATCHPAD, im.scratchpad(e->pd.scratchpad_desc())}};
  if (bias) {
    r.dbias = Tensor::empty({w_shape[0]}, Device::cpu());
    args.emplace(DNNL_ARG_DIFF_BIAS, memory(e->dbias_md, im.eng, r.dbias.data()));
  }
  im.run(e->prim, args);
  if (e->dw.needed()) im.primitive_reorder(e->dw, dw_tmp.data(), r.dw.data());
  return r;
}

std::string CpuBackend::conv_impl_info(const Shape& x_shape, const Layout& x_layout, const Shape& w_shape, bool bias,
                                       const Conv2dParams& p, int which) {
  auto& im = *impl_;
  const Layout wl = Layout::plain();
  auto f = fwd_entry(im, x_shape, x_layout, w_shape, wl, bias, p);
  switch (which) {
    case 0: return f->pd.impl_info_str();
    case 1: return bwd_data_entry(im, f->y_shape, f->out.layout, w_shape, wl, x_shape, x_layout, p)->pd.impl_info_str();
    case 2:
      return bwd_weights_entry(im, x_shape, x_layout, f->y_shape, f->out.layout, w_shape, wl, bias, p)
          ->pd.impl_info_str();
    default: throw std::invalid_argument("conv_impl_info: which must be 0, 1 or 2");
  }
}

Layout CpuBackend::conv_output_layout(const Shape& x_shape, const Layout& x_layout, const Shape& w_shape, bool bias,
                                      const Conv2dParams& p) {
  return fwd_entry(*impl_, x_shape, x_layout, w_shape, Layout::plain(), bias, p)->out.layout;
}

Layout CpuBackend::conv_weights_layout(const Shape& w_shape, const Conv2dParams& p) {
  if (w_shape.size() != 4 || p.groups != 1) return Layout::plain();
  struct Choice {
    Layout layout;
  };
  return impl_
      ->get<Choice>(Key("conv_weights_layout") << w_shape << p,
                    [&] {
                      // What forward and the weights gradient pick for an image of a few output pixels in the
                      // channel-blocked layout they produce: their jit kernels' weights format does not depend
                      // on the batch or the image size. Kept only where both pick it.
                      const int64_t h = (2 - 1) * p.stride_h + (w_shape[2] - 1) * p.dilation_h + 1;
                      const int64_t w = (2 - 1) * p.stride_w + (w_shape[3] - 1) * p.dilation_w + 1;
                      const ConvGeom c = conv_geom({2, w_shape[1], h, w}, w_shape, p);
                      const auto fwd = fwd_pd(impl_->eng, c, false);
                      const auto bwd = dnnl_pd::conv_backward_weights(impl_->eng, descs(c, false), fwd);
                      for (int block : {16, 8}) {
                        const Layout l = Layout::weights_blocked(block);
                        if (w_shape[0] % block != 0 || w_shape[1] % block != 0) continue;
                        const md m = md_for(w_shape, l);
                        if (fwd.weights_desc() == m && bwd.diff_weights_desc() == m)
                          return std::make_shared<Choice>(Choice{l});
                      }
                      return std::make_shared<Choice>(Choice{Layout::plain()});
                    })
      ->layout;
}

}  // namespace ts::engine::cpu
