#pragma once
// The finite-difference gradient checker every op test uses. The function's output is reduced
// to a scalar with a fixed random projection, L = sum(out * r); analytic dL/dinput (through
// engine::grad) is compared with central differences (L(x + eps) - L(x - eps)) / 2 eps,
// accumulated in double. gradgradcheck does the same for the gradient of <dL/dinputs, v>.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace ts::engine {

struct GradcheckOptions {
  double eps = 1e-2;  // fp32: larger steps keep rounding noise below the tolerance
  double atol = 1e-2;
  double rtol = 1e-2;
  int64_t max_elements_per_input = 64;  // sampled deterministically when an input is larger
  uint64_t seed = 1234;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  double max_rel_error = 0;
  // The worst element (largest |analytic - numeric| - atol - rtol |numeric|).
  int worst_input = -1;
  int64_t worst_index = -1;
  double worst_analytic = 0, worst_numeric = 0;
  int64_t checked = 0;
  std::string message;  // human-readable summary (for test failure output)
};

using GradFn = std::function<Tensor(const std::vector<Tensor>&)>;

// `inputs` must be plain CPU tensors; those with requires_grad set are checked (their data
// is perturbed in place and restored).
GradcheckResult gradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradcheckOptions& options = {});

// Second order: checks the gradient of s(x) = <dL/dx, v> (v fixed random, L as above) with
// respect to the inputs, where dL/dx comes from engine::grad with create_graph.
GradcheckResult gradgradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradcheckOptions& options = {});

}  // namespace ts::engine
