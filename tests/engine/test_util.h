#pragma once
// Helpers shared by the engine tests: deterministic inputs and naive reference kernels.
#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"

// A gradient check (engine/gradcheck.h) that passed and checked something.
#define EXPECT_GRADCHECK(expr)         \
  do {                                 \
    const GradcheckResult _r = (expr); \
    EXPECT_TRUE(_r.ok) << _r.message;  \
    EXPECT_GT(_r.checked, 0);          \
  } while (0)

namespace ts::engine::testing {

// Uniform in [lo, hi).
std::vector<float> uniform(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
Tensor rand_tensor(const Shape& shape, uint64_t seed, bool requires_grad = true, float lo = -1.0f, float hi = 1.0f);
// Values with |v| in [0.1, 1] and random sign: no element near relu's kink.
Tensor away_from_zero(const Shape& shape, uint64_t seed, bool requires_grad = true);
// A random permutation of {0, gap, 2 gap, ...} (shifted to be centred): no ties anywhere.
Tensor distinct_values(const Shape& shape, uint64_t seed, float gap = 0.05f, bool requires_grad = true);

std::vector<float> naive_conv2d(const std::vector<float>& x, const Shape& xs, const std::vector<float>& w,
                                const Shape& ws, const std::vector<float>* bias, const Conv2dParams& p, Shape* ys);
std::vector<float> naive_pool2d(const std::vector<float>& x, const Shape& xs, const Pool2dParams& p, bool max,
                                Shape* ys);
std::vector<float> naive_linear(const std::vector<float>& x, int64_t n, int64_t i, const std::vector<float>& w,
                                int64_t o, const std::vector<float>* bias);

// Square stride, padding, dilation.
Conv2dParams conv_params(int64_t stride, int64_t pad, int64_t dil = 1, int64_t groups = 1);
// Square kernel, stride and padding.
Pool2dParams pool_params(int64_t k, int64_t s, int64_t pad, bool include_pad = false);

// Deep Speech 2's clipped ReLU, min(max(x, 0), c): values kept 0.05 away from both kinks
// (the finite-difference step is 0.01), so that the checks see the three pieces.
Tensor away_from_kinks(const Shape& shape, uint64_t seed, float ceiling, bool requires_grad = true);
// RoIs [R, 5] (image, x1, y1, x2, y2) from their rows.
Tensor rois_of(const std::vector<std::vector<float>>& rows);

// max |a - b| / (1 + |b|)
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace ts::engine::testing
