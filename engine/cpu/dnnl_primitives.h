#pragma once
// Internal to engine/cpu/: the primitive descriptors the CPU backend creates, and the one place
// that knows which oneDNN major version it builds against: 2.x describes an operation first
// (an op `desc`) and makes the primitive descriptor from it; 3.x takes the same arguments in the
// primitive descriptor's constructor. Every descriptor uses the backend's attribute (a
// user-managed scratchpad). Dilations are oneDNN's: 0 for none.
#include "engine/cpu/dnnl_common.h"

namespace ts::engine::cpu::dnnl_pd {

using ConvForward = dnnl::convolution_forward::primitive_desc;
using ConvBackwardData = dnnl::convolution_backward_data::primitive_desc;
using ConvBackwardWeights = dnnl::convolution_backward_weights::primitive_desc;
using BatchNormForward = dnnl::batch_normalization_forward::primitive_desc;
using BatchNormBackward = dnnl::batch_normalization_backward::primitive_desc;
using PoolForward = dnnl::pooling_forward::primitive_desc;
using PoolBackward = dnnl::pooling_backward::primitive_desc;
using Concat = dnnl::concat::primitive_desc;

// A 2-D convolution's memory descriptors (`bias` empty: none) and geometry.
struct ConvDescs {
  md src, weights, bias, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};
ConvForward conv_forward(const dnnl::engine& eng, const ConvDescs& c);
ConvBackwardData conv_backward_data(const dnnl::engine& eng, const ConvDescs& c, const ConvForward& hint);
ConvBackwardWeights conv_backward_weights(const dnnl::engine& eng, const ConvDescs& c, const ConvForward& hint);

// Batch normalisation over `data` with scale and shift; global_stats: the given mean and variance;
// relu: a ReLU fused after it (fuse_norm_relu: training keeps a workspace, its mask).
BatchNormForward batch_norm_forward(const dnnl::engine& eng, const md& data, float eps, bool training,
                                    bool global_stats, bool relu = false);
BatchNormBackward batch_norm_backward(const dnnl::engine& eng, const md& data, float eps, bool global_stats,
                                      const BatchNormForward& hint, bool relu = false);

// 2-D pooling (forward for training: max pooling keeps its workspace).
struct PoolDescs {
  dnnl::algorithm algorithm;
  md src, dst;
  memory::dims strides, kernel, pad_l, pad_r;
};
PoolForward pool_forward(const dnnl::engine& eng, const PoolDescs& p);
PoolBackward pool_backward(const dnnl::engine& eng, const PoolDescs& p, const PoolForward& hint);

Concat concat(const dnnl::engine& eng, const md& dst, int axis, const std::vector<md>& srcs);

}  // namespace ts::engine::cpu::dnnl_pd
