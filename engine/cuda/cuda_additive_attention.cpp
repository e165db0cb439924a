// Additive (Bahdanau) attention for one decoder step on the GPU (seq2seq); kernels in
// kernels_additive_attention.cu. Arguments are checked as the CPU backend checks them
// (cpu_additive_attention.cpp), with its messages: the lengths are read on the host for that
// (B floats; the copy waits for the work queued before it), so a bad length is the CPU's
// std::invalid_argument, never a kernel reading past a row. The kernels then read the lengths
// on the device.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/kernels_additive_attention.h"

namespace ts::engine::cuda {

namespace {

// Defined, on this device, plain and exactly `shape`.
void check_plain(const Tensor& t, int device, const char* op, const char* what, const Shape& shape) {
  check_on(t, device, op, what);
  if (!t.layout().is_plain() || t.shape() != shape) {
    throw std::invalid_argument(std::string(op) + ": " + what + " must be plain " + shape_str(shape) + ", got " +
                                shape_str(t.shape()) + " " + t.layout().str());
  }
}

kernels::AdditiveAttentionDims check_args(const char* op, const Tensor& query, const Tensor& keys,
                                          const Tensor& values, const Tensor& v, int device) {
  if (!query.defined() || !keys.defined() || !values.defined() || !v.defined() || query.dim() != 2 ||
      keys.dim() != 3 || values.dim() != 3) {
    throw std::invalid_argument(std::string(op) + ": query [B, A], keys [B, S, A], values [B, S, D], v [A] expected");
  }
  kernels::AdditiveAttentionDims d;
  d.b = query.size(0);
  d.s = keys.size(1);
  d.a = query.size(1);
  d.d = values.size(2);
  check_plain(query, device, op, "query", {d.b, d.a});
  check_plain(keys, device, op, "keys", {d.b, d.s, d.a});
  check_plain(values, device, op, "values", {d.b, d.s, d.d});
  check_plain(v, device, op, "v", {d.a});
  return d;
}

}  // namespace

Backend::AdditiveAttentionResult CudaBackend::additive_attention_forward(const Tensor& query, const Tensor& keys,
                                                                         const Tensor& values, const Tensor& v,
                                                                         const Tensor* lengths) {
  const char* op = "additive_attention";
  const kernels::AdditiveAttentionDims d = check_args(op, query, keys, values, v, device_);
  const float* lens = nullptr;
  if (lengths && lengths->defined()) {
    check_plain(*lengths, device_, op, "lengths", {d.b});
    const std::vector<float> host = lengths->to_vector();
    for (int64_t b = 0; b < d.b; ++b) {
      const float l = host[static_cast<size_t>(b)];
      if (!(l >= 0.0f && l <= static_cast<float>(d.s)) || l != std::floor(l)) {
        throw std::invalid_argument(std::string(op) + ": lengths[" + std::to_string(b) + "] = " + std::to_string(l) +
                                    " is not an integer in [0, " + std::to_string(d.s) + "]");
      }
    }
    lens = lengths->data();
  }
  Env env(*impl_);
  AdditiveAttentionResult r{Tensor::empty({d.b, d.d}, query.device()), Tensor::empty({d.b, d.s}, query.device())};
  TS_CUDA_CHECK(kernels::additive_attention_forward(query.data(), keys.data(), values.data(), v.data(), lens, d,
                                                    r.probs.data(), r.context.data(), env.stream));
  return r;
}

Backend::AdditiveAttentionGrads CudaBackend::additive_attention_backward(const Tensor& dcontext, const Tensor& query,
                                                                         const Tensor& keys, const Tensor& values,
                                                                         const Tensor& v, const Tensor& probs) {
  const char* op = "additive_attention_backward";
  const kernels::AdditiveAttentionDims d = check_args(op, query, keys, values, v, device_);
  check_plain(dcontext, device_, op, "dcontext", {d.b, d.d});
  check_plain(probs, device_, op, "probs", {d.b, d.s});
  Env env(*impl_);
  AdditiveAttentionGrads g{Tensor::empty({d.b, d.a}, query.device()), Tensor::empty({d.b, d.s, d.a}, query.device()),
                           Tensor::empty({d.b, d.s, d.d}, query.device()), Tensor::empty({d.a}, query.device())};
  Tensor ws = workspace_tensor(
      std::max<int64_t>(kernels::additive_attention_backward_workspace(d), 1) * static_cast<int64_t>(sizeof(float)),
      device_);
  TS_CUDA_CHECK(kernels::additive_attention_backward(dcontext.data(), query.data(), keys.data(), values.data(),
                                                     v.data(), probs.data(), d, ws.data(), g.dquery.data(),
                                                     g.dkeys.data(), g.dvalues.data(), g.dv.data(), env.stream));
  return g;
}

}  // namespace ts::engine::cuda
