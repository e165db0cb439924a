#include "engine/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/context.h"
#include "engine/ops.h"

namespace ts::engine {

namespace {

std::vector<float> random_vector(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// L = sum(out * r) in double.
double project(const Tensor& out, const std::vector<float>& r) {
  const std::vector<float> v = out.to_vector();
  if (v.size() != r.size()) throw std::logic_error("gradcheck: the function's output changed size");
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * r[i];
  return s;
}

std::vector<int64_t> sample_indices(int64_t n, int64_t max, uint64_t seed) {
  std::vector<int64_t> idx;
  if (n <= max) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  std::mt19937_64 rng(seed);
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(max));
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace

GradcheckResult gradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradcheckOptions& o) {
  GradcheckResult res;
  std::vector<Tensor> checked;
  std::vector<int> checked_pos;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    if (!t.layout().is_plain() || !t.device().is_cpu()) {
      throw std::invalid_argument("gradcheck: inputs must be plain cpu tensors");
    }
    checked.push_back(t);
    checked_pos.push_back(static_cast<int>(i));
  }
  if (checked.empty()) throw std::invalid_argument("gradcheck: no input requires grad");

  // Analytic gradients.
  Tensor out = f(inputs);
  const std::vector<float> r = random_vector(out.numel(), o.seed);
  Tensor seed = Tensor::from_vector(out.shape(), r, out.device());
  if (!out.layout().is_plain()) seed = backend_of(out).to_layout(seed, out.layout());
  std::vector<Tensor> analytic;
  if (out.requires_grad()) {
    analytic = grad({out}, checked, {seed});
  } else {
    analytic.resize(checked.size());
  }

  std::ostringstream msg;
  double worst_excess = -1e300;
  for (size_t k = 0; k < checked.size(); ++k) {
    Tensor& x = checked[k];
    std::vector<float> a(static_cast<size_t>(x.numel()), 0.0f);
    if (analytic[k].defined()) {
      if (analytic[k].shape() != x.shape()) {
        throw std::logic_error("gradcheck: gradient of input " + std::to_string(checked_pos[k]) + " has shape " +
                               shape_str(analytic[k].shape()) + ", input " + shape_str(x.shape()));
      }
      a = analytic[k].to_vector();
    }
    float* p = x.data();
    for (int64_t i : sample_indices(x.numel(), o.max_elements_per_input, o.seed + 17 * k)) {
      const float orig = p[i];
      p[i] = static_cast<float>(orig + o.eps);
      const double lp = project(f(inputs), r);
      p[i] = static_cast<float>(orig - o.eps);
      const double lm = project(f(inputs), r);
      p[i] = orig;
      // The step actually taken in fp32.
      const double step =
          static_cast<double>(static_cast<float>(orig + o.eps)) - static_cast<double>(static_cast<float>(orig - o.eps));
      const double num = (lp - lm) / step;
      const double an = a[static_cast<size_t>(i)];
      const double err = std::abs(an - num);
      const double rel = err / std::max(std::abs(num), 1e-6);
      res.max_abs_error = std::max(res.max_abs_error, err);
      res.max_rel_error = std::max(res.max_rel_error, rel);
      ++res.checked;
      const double excess = err - o.atol - o.rtol * std::abs(num);
      if (excess > worst_excess) {
        worst_excess = excess;
        res.worst_input = checked_pos[k];
        res.worst_index = i;
        res.worst_analytic = an;
        res.worst_numeric = num;
      }
      if (excess > 0) res.ok = false;
    }
  }
  msg << (res.ok ? "gradcheck ok" : "gradcheck FAILED") << ": checked " << res.checked << " elements, max abs error "
      << res.max_abs_error << ", max rel error " << res.max_rel_error << "; worst: input " << res.worst_input
      << " element " << res.worst_index << " analytic " << res.worst_analytic << " numeric " << res.worst_numeric;
  res.message = msg.str();
  return res;
}

GradcheckResult gradgradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradcheckOptions& o) {
  // s(x) = sum_k <dL/dx_k, v_k>, with L = sum(f(x) * r): a scalar function whose gradient
  // needs the backward of the backward.
  GradFn s = [&f, o](const std::vector<Tensor>& in) -> Tensor {
    std::vector<Tensor> checked;
    for (const auto& t : in) {
      if (t.defined() && t.requires_grad()) checked.push_back(t);
    }
    Tensor out = f(in);
    const std::vector<float> r = random_vector(out.numel(), o.seed);
    Tensor seed = Tensor::from_vector(out.shape(), r, out.device());
    if (!out.layout().is_plain()) seed = backend_of(out).to_layout(seed, out.layout());
    std::vector<Tensor> g = grad({out}, checked, {seed}, /*create_graph=*/true);
    Tensor total;
    for (size_t k = 0; k < checked.size(); ++k) {
      if (!g[k].defined()) continue;
      Tensor v = Tensor::from_vector(checked[k].shape(), random_vector(checked[k].numel(), o.seed + 101 + k));
      Tensor term = ops::sum(ops::mul(ops::to_layout(g[k], Layout::plain()), v));
      total = total.defined() ? ops::add(total, term) : term;
    }
    if (!total.defined()) total = Tensor::zeros({1}, Device::cpu());
    return total;
  };
  GradcheckOptions o2 = o;
  o2.seed = o.seed + 7;
  return gradcheck(s, std::move(inputs), o2);
}

}  // namespace ts::engine
