// The sequence models' Backend methods (layer norm, multi-head attention) and the CTC loss on
// the GPU (GELU, dropout, label-smoothed cross-entropy and the sum of squares: their families).
// Kernels in kernels_seq.cu; the attention GEMMs are batched cuBLAS calls. Checks and error
// messages follow the CPU backend's (cpu_sequence.cpp, cpu_ctc.cpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/pointwise_kernels.h"
#include "engine/cuda/device_memory.h"

namespace ts::engine::cuda {

// ---------------------------------------------------------------- layer norm

// ---------------------------------------------------------------- attention

// ---------------------------------------------------------------- CTC

namespace {

[[noreturn]] void ctc_fail(const std::string& msg) { throw std::invalid_argument("ctc_loss: " + msg); }

// fp32 values that must be integers in [lo, hi] (read on the host).
std::vector<int64_t> as_integers(const Tensor& t, const char* what, int64_t lo, int64_t hi) {
  const std::vector<float> v = t.to_vector();
  std::vector<int64_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = v[i];
    if (!(x == std::floor(x)) || x < static_cast<float>(lo) || x > static_cast<float>(hi)) {
      ctc_fail(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(x) + " is not an integer in [" +
               std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    r[i] = static_cast<int64_t>(x);
  }
  return r;
}

}  // namespace

Backend::CtcResult CudaBackend::ctc_loss_forward(const Tensor& logits_in, const Tensor& targets,
                                                 const Tensor& input_lengths, const Tensor& target_lengths,
                                                 int64_t blank, CtcReduction reduction, bool zero_infinity,
                                                 bool want_grad) {
  const char* op = "ctc_loss";
  check_on(logits_in, device_, op, "logits");
  check_on(targets, device_, op, "targets");
  check_on(input_lengths, device_, op, "input_lengths");
  check_on(target_lengths, device_, op, "target_lengths");
  if (logits_in.dim() != 3) ctc_fail("logits must be [T, N, K], got " + shape_str(logits_in.shape()));
  const int64_t t_max = logits_in.size(0), n = logits_in.size(1), k_count = logits_in.size(2);
  if (k_count < 1) ctc_fail("logits have no classes: " + shape_str(logits_in.shape()));
  if (blank < 0 || blank >= k_count) {
    ctc_fail("blank " + std::to_string(blank) + " is not a class in [0, " + std::to_string(k_count) + ")");
  }
  if (input_lengths.dim() != 1 || input_lengths.size(0) != n || target_lengths.dim() != 1 ||
      target_lengths.size(0) != n) {
    ctc_fail("input_lengths " + shape_str(input_lengths.shape()) + " and target_lengths " +
             shape_str(target_lengths.shape()) + " must both be [N] = [" + std::to_string(n) + "]");
  }
  if (targets.dim() != 1) {
    ctc_fail("targets must be 1-D (the label sequences concatenated), got " + shape_str(targets.shape()));
  }
  const std::vector<int64_t> frames = as_integers(input_lengths, "input_lengths", 0, t_max);
  const std::vector<int64_t> lengths =
      as_integers(target_lengths, "target_lengths", 0, std::numeric_limits<int32_t>::max());
  std::vector<int64_t> offsets(static_cast<size_t>(n));
  int64_t total = 0, max_len = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
    max_len = std::max(max_len, lengths[i]);
  }
  if (total != targets.size(0)) {
    ctc_fail("target_lengths add up to " + std::to_string(total) + " but targets hold " +
             std::to_string(targets.size(0)));
  }
  const std::vector<int64_t> labels = as_integers(targets, "targets", 0, k_count - 1);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == blank) ctc_fail("targets[" + std::to_string(i) + "] is the blank label " + std::to_string(blank));
  }
  const Tensor logits = as_plain(*this, logits_in);

  // frames, lengths, offsets, weights (as doubles) and labels in one upload.
  std::vector<int64_t> packed(static_cast<size_t>(4 * n) + labels.size());
  for (int64_t i = 0; i < n; ++i) {
    const size_t u = static_cast<size_t>(i);
    packed[u] = frames[u];
    packed[static_cast<size_t>(n) + u] = lengths[u];
    packed[static_cast<size_t>(2 * n) + u] = offsets[u];
    const double w = reduction == CtcReduction::mean
                         ? 1.0 / (static_cast<double>(n) * static_cast<double>(std::max<int64_t>(lengths[u], 1)))
                         : 1.0;
    std::memcpy(&packed[static_cast<size_t>(3 * n) + u], &w, sizeof w);
  }
  std::copy(labels.begin(), labels.end(), packed.begin() + 4 * n);
  Tensor args = workspace_tensor(static_cast<int64_t>(std::max<size_t>(packed.size(), 1) * sizeof(int64_t)), device_);
  copy_to_device(args.data(), packed.data(), packed.size() * sizeof(int64_t), device_);

  const int64_t s_max = 2 * max_len + 1;
  auto doubles = [&](int64_t count) {
    return workspace_tensor(std::max<int64_t>(count, 1) * static_cast<int64_t>(sizeof(double)), device_);
  };
  Tensor lp = doubles(n * t_max * k_count), alpha = doubles(n * t_max * s_max), beta = doubles(n * 2 * s_max),
         contrib = doubles(n);
  CtcResult r;
  r.loss = Tensor::empty({1}, logits.device());
  r.nll = Tensor::empty({n}, logits.device());
  if (want_grad) r.grad = Tensor::zeros({t_max, n, k_count}, logits.device());  // frames past T_n stay 0
  Env env(*impl_);
  const auto* base = reinterpret_cast<const int64_t*>(args.data());
  kernels::CtcArgs a;
  a.logits = logits.data();
  a.t_max = t_max;
  a.n = n;
  a.k = k_count;
  a.s_max = s_max;
  a.frames = base;
  a.lengths = base + n;
  a.offsets = base + 2 * n;
  a.weights = reinterpret_cast<const double*>(base + 3 * n);
  a.labels = base + 4 * n;
  a.blank = blank;
  a.zero_infinity = zero_infinity;
  a.lp = reinterpret_cast<double*>(lp.data());
  a.alpha = reinterpret_cast<double*>(alpha.data());
  a.beta = reinterpret_cast<double*>(beta.data());
  a.contrib = reinterpret_cast<double*>(contrib.data());
  a.nll = r.nll.data();
  a.loss = r.loss.data();
  a.grad = want_grad ? r.grad.data() : nullptr;
  TS_CUDA_CHECK(kernels::ctc_loss(a, env.stream));
  return r;
}

Tensor CudaBackend::ctc_loss_backward(const Tensor& dloss, const Tensor& grad) {
  check_on(dloss, device_, "ctc_loss", "dloss");
  check_on(grad, device_, "ctc_loss", "grad");
  if (dloss.numel() != 1 || grad.dim() != 3) {
    ctc_fail("backward: dloss must be [1] and grad [T, N, K], got " + shape_str(dloss.shape()) + " and " +
             shape_str(grad.shape()));
  }
  const Tensor g = as_plain(*this, grad);
  Env env(*impl_);
  Tensor dx = Tensor::empty(g.shape(), g.device());
  TS_CUDA_CHECK(kernels::scale_by_device_scalar(g.data(), dloss.data(), dx.data(), g.numel(), env.stream));
  return dx;
}

}  // namespace ts::engine::cuda
