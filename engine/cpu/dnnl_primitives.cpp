#include "engine/cpu/dnnl_primitives.h"

#include <vector>

namespace ts::engine::cpu::dnnl_pd {

namespace {

using dnnl::algorithm;
using dnnl::normalization_flags;
using dnnl::prop_kind;

normalization_flags bn_flags(bool global_stats, bool relu) {
  normalization_flags f = normalization_flags::use_scale | normalization_flags::use_shift;
  if (global_stats) f = f | normalization_flags::use_global_stats;
  if (relu) f = f | normalization_flags::fuse_norm_relu;
  return f;
}

bool has_bias(const ConvDescs& c) { return !c.bias.is_zero(); }

}  // namespace

#if DNNL_VERSION_MAJOR >= 3

namespace {

// Pooling without dilation (3.x asks for it).
memory::dims no_dilation(const memory::dims& kernel) { return memory::dims(kernel.size(), 0); }

}  // namespace

ConvForward conv_forward(const dnnl::engine& eng, const ConvDescs& c) {
  const auto attr = CpuBackend::Impl::attr();
  if (has_bias(c)) {
    return ConvForward(eng, prop_kind::forward_training, algorithm::convolution_direct, c.src, c.weights, c.bias, c.dst,
                       c.strides, c.dilates, c.pad_l, c.pad_r, attr);
  }
  return ConvForward(eng, prop_kind::forward_training, algorithm::convolution_direct, c.src, c.weights, c.dst,
                     c.strides, c.dilates, c.pad_l, c.pad_r, attr);
}

ConvBackwardData conv_backward_data(const dnnl::engine& eng, const ConvDescs& c, const ConvForward& hint) {
  return ConvBackwardData(eng, algorithm::convolution_direct, c.src, c.weights, c.dst, c.strides, c.dilates, c.pad_l,
                          c.pad_r, hint, CpuBackend::Impl::attr());
}

ConvBackwardWeights conv_backward_weights(const dnnl::engine& eng, const ConvDescs& c, const ConvForward& hint) {
  const auto attr = CpuBackend::Impl::attr();
  if (has_bias(c)) {
    return ConvBackwardWeights(eng, algorithm::convolution_direct, c.src, c.weights, c.bias, c.dst, c.strides,
                               c.dilates, c.pad_l, c.pad_r, hint, attr);
  }
  return ConvBackwardWeights(eng, algorithm::convolution_direct, c.src, c.weights, c.dst, c.strides, c.dilates, c.pad_l,
                             c.pad_r, hint, attr);
}

BatchNormForward batch_norm_forward(const dnnl::engine& eng, const md& data, float eps, bool training,
                                    bool global_stats, bool relu) {
  return BatchNormForward(eng, training ? prop_kind::forward_training : prop_kind::forward_inference, data, data, eps,
                          bn_flags(global_stats, relu), CpuBackend::Impl::attr());
}

BatchNormBackward batch_norm_backward(const dnnl::engine& eng, const md& data, float eps, bool global_stats,
                                      const BatchNormForward& hint, bool relu) {
  return BatchNormBackward(eng, prop_kind::backward, data, data, data, eps, bn_flags(global_stats, relu), hint,
                           CpuBackend::Impl::attr());
}

PoolForward pool_forward(const dnnl::engine& eng, const PoolDescs& p) {
  return PoolForward(eng, prop_kind::forward_training, p.algorithm, p.src, p.dst, p.strides, p.kernel,
                     no_dilation(p.kernel), p.pad_l, p.pad_r, CpuBackend::Impl::attr());
}

PoolBackward pool_backward(const dnnl::engine& eng, const PoolDescs& p, const PoolForward& hint) {
  return PoolBackward(eng, p.algorithm, p.src, p.dst, p.strides, p.kernel, no_dilation(p.kernel), p.pad_l, p.pad_r,
                      hint, CpuBackend::Impl::attr());
}

Concat concat(const dnnl::engine& eng, const md& dst, int axis, const std::vector<md>& srcs) {
  return Concat(eng, dst, axis, srcs, CpuBackend::Impl::attr());
}

#else  // oneDNN 2.x: an op descriptor first

ConvForward conv_forward(const dnnl::engine& eng, const ConvDescs& c) {
  using Desc = dnnl::convolution_forward::desc;
  const Desc d = has_bias(c) ? Desc(prop_kind::forward_training, algorithm::convolution_direct, c.src, c.weights,
                                    c.bias, c.dst, c.strides, c.dilates, c.pad_l, c.pad_r)
                             : Desc(prop_kind::forward_training, algorithm::convolution_direct, c.src, c.weights, c.dst,
                                    c.strides, c.dilates, c.pad_l, c.pad_r);
  return ConvForward(d, CpuBackend::Impl::attr(), eng);
}

ConvBackwardData conv_backward_data(const dnnl::engine& eng, const ConvDescs& c, const ConvForward& hint) {
  const dnnl::convolution_backward_data::desc d(algorithm::convolution_direct, c.src, c.weights, c.dst, c.strides,
                                                c.dilates, c.pad_l, c.pad_r);
  return ConvBackwardData(d, CpuBackend::Impl::attr(), eng, hint);
}

ConvBackwardWeights conv_backward_weights(const dnnl::engine& eng, const ConvDescs& c, const ConvForward& hint) {
  using Desc = dnnl::convolution_backward_weights::desc;
  const Desc d =
      has_bias(c)
          ? Desc(algorithm::convolution_direct, c.src, c.weights, c.bias, c.dst, c.strides, c.dilates, c.pad_l, c.pad_r)
          : Desc(algorithm::convolution_direct, c.src, c.weights, c.dst, c.strides, c.dilates, c.pad_l, c.pad_r);
  return ConvBackwardWeights(d, CpuBackend::Impl::attr(), eng, hint);
}

BatchNormForward batch_norm_forward(const dnnl::engine& eng, const md& data, float eps, bool training,
                                    bool global_stats, bool relu) {
  const dnnl::batch_normalization_forward::desc d(training ? prop_kind::forward_training : prop_kind::forward_inference,
                                                  data, eps, bn_flags(global_stats, relu));
  return BatchNormForward(d, CpuBackend::Impl::attr(), eng);
}

BatchNormBackward batch_norm_backward(const dnnl::engine& eng, const md& data, float eps, bool global_stats,
                                      const BatchNormForward& hint, bool relu) {
  const dnnl::batch_normalization_backward::desc d(prop_kind::backward, data, data, eps, bn_flags(global_stats, relu));
  return BatchNormBackward(d, CpuBackend::Impl::attr(), eng, hint);
}

PoolForward pool_forward(const dnnl::engine& eng, const PoolDescs& p) {
  const dnnl::pooling_forward::desc d(prop_kind::forward_training, p.algorithm, p.src, p.dst, p.strides, p.kernel,
                                      p.pad_l, p.pad_r);
  return PoolForward(d, CpuBackend::Impl::attr(), eng);
}

PoolBackward pool_backward(const dnnl::engine& eng, const PoolDescs& p, const PoolForward& hint) {
  const dnnl::pooling_backward::desc d(p.algorithm, p.src, p.dst, p.strides, p.kernel, p.pad_l, p.pad_r);
  return PoolBackward(d, CpuBackend::Impl::attr(), eng, hint);
}

Concat concat(const dnnl::engine& eng, const md& dst, int axis, const std::vector<md>& srcs) {
  return Concat(dst, axis, srcs, eng, CpuBackend::Impl::attr());
}

#endif

}  // namespace ts::engine::cpu::dnnl_pd
