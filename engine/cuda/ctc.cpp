// The ctc family on the GPU: the CTC loss, one block per sample (kernels in ctc.cu). The
// arguments are checked and the samples planned on the host by ctc_plan.h, as on the CPU.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/ctc_plan.h"
#include "engine/cuda/ctc_kernels.h"
#include "engine/cuda/cuda_common.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/pointwise_kernels.h"

namespace ts::engine::cuda {

Backend::CtcResult CudaBackend::ctc_loss_forward(const Tensor& logits_in, const Tensor& targets,
                                                 const Tensor& input_lengths, const Tensor& target_lengths,
                                                 int64_t blank, CtcReduction reduction, bool zero_infinity,
                                                 bool want_grad) {
  const char* op = "ctc_loss";
  check_on(logits_in, device_, op, "logits");
  check_on(targets, device_, op, "targets");
  check_on(input_lengths, device_, op, "input_lengths");
  check_on(target_lengths, device_, op, "target_lengths");
  const ctc::Plan plan = ctc::plan(logits_in, targets, input_lengths, target_lengths, blank);
  const int64_t t_max = plan.t_max, n = plan.n, k_count = plan.k, max_len = plan.max_length;
  const std::vector<int64_t>& frames = plan.frames;
  const std::vector<int64_t>& lengths = plan.lengths;
  const std::vector<int64_t>& offsets = plan.offsets;
  const std::vector<int64_t>& labels = plan.labels;
  const Tensor logits = as_plain(*this, logits_in);

  // frames, lengths, offsets, weights (as doubles) and labels in one upload.
  std::vector<int64_t> packed(static_cast<size_t>(4 * n) + labels.size());
  for (int64_t i = 0; i < n; ++i) {
    const size_t u = static_cast<size_t>(i);
    packed[u] = frames[u];
    packed[static_cast<size_t>(n) + u] = lengths[u];
    packed[static_cast<size_t>(2 * n) + u] = offsets[u];
    const double w = plan.weight(i, reduction);
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
  ctc::check_backward(dloss, grad);
  const Tensor g = as_plain(*this, grad);
  Env env(*impl_);
  Tensor dx = Tensor::empty(g.shape(), g.device());
  TS_CUDA_CHECK(kernels::scale_by_device_scalar(g.data(), dloss.data(), dx.data(), g.numel(), env.stream));
  return dx;
}

}  // namespace ts::engine::cuda
