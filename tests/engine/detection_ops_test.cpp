// The detection ops (engine/ops/roi.cpp, loss.cpp, layout.cpp): known answers worked out by hand and
// finite-difference gradient checks of every differentiable one.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

Tensor rois_of(const std::vector<std::vector<float>>& rows) {
  std::vector<float> v;
  for (const auto& r : rows) v.insert(v.end(), r.begin(), r.end());
  return Tensor::from_vector({static_cast<int64_t>(rows.size()), 5}, v);
}

// A [1, 1, H, W] map whose value is its column index (or its row index): bilinear
// interpolation reproduces linear functions exactly, so RoIAlign's bins average the sample
// coordinates.
Tensor ramp(int64_t h, int64_t w, bool by_column) {
  std::vector<float> v(static_cast<size_t>(h * w));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) v[static_cast<size_t>(y * w + x)] = static_cast<float>(by_column ? x : y);
  return Tensor::from_vector({1, 1, h, w}, v);
}

// ---------------------------------------------------------------- RoIAlign

TEST(DetectionOps, RoiAlignAveragesBilinearSamples) {
  // RoI x 1..5 on an 8x8 map, 2x2 bins of 2 cells, 2x2 samples per bin at 0.5 and 1.5 cells
  // into the bin: bin 0 samples x = 1.5, 2.5 (mean 2), bin 1 x = 3.5, 4.5 (mean 4).
  const Tensor cols = ramp(8, 8, true), rows = ramp(8, 8, false);
  const Tensor r = rois_of({{0, 1, 1, 5, 5}});
  EXPECT_EQ(ops::roi_align(cols, r, 2, 2, 1.0f, 2, false).to_vector(), (std::vector<float>{2, 4, 2, 4}));
  EXPECT_EQ(ops::roi_align(rows, r, 2, 2, 1.0f, 2, false).to_vector(), (std::vector<float>{2, 2, 4, 4}));
  // spatial_scale 1/2: the same RoI in image pixels 2..10 maps onto cells 1..5.
  EXPECT_EQ(ops::roi_align(cols, rois_of({{0, 2, 2, 10, 10}}), 2, 2, 0.5f, 2, false).to_vector(),
            (std::vector<float>{2, 4, 2, 4}));
  // aligned: half a cell to the left; the RoI spans 0.5..4.5, bins at 1.5 and 3.5.
  EXPECT_EQ(ops::roi_align(cols, r, 2, 2, 1.0f, 2, true).to_vector(), (std::vector<float>{1.5f, 3.5f, 1.5f, 3.5f}));
  // Adaptive sampling (ratio 0): ceil(2 cells / bin) = 2 samples, the same answer.
  EXPECT_EQ(ops::roi_align(cols, r, 2, 2, 1.0f, 0, false).to_vector(), (std::vector<float>{2, 4, 2, 4}));
  // The original (aligned = false) stretches a degenerate RoI to one cell: x 3..4, one bin,
  // samples at 3.25 and 3.75.
  EXPECT_FLOAT_EQ(ops::roi_align(cols, rois_of({{0, 3, 3, 3, 3}}), 1, 1, 1.0f, 2, false).item(), 3.5f);
}

TEST(DetectionOps, RoiAlignClampsAtTheBorderAndZeroesFarOutside) {
  const Tensor cols = ramp(4, 4, true);
  // Samples beyond the last cell clamp to it: x = 3.5 reads column 3.
  EXPECT_FLOAT_EQ(ops::roi_align(cols, rois_of({{0, 3, 0, 4, 1}}), 1, 1, 1.0f, 1, false).item(), 3.0f);
  // More than one cell outside the map: nothing.
  EXPECT_FLOAT_EQ(ops::roi_align(cols, rois_of({{0, 10, 10, 12, 12}}), 1, 1, 1.0f, 2, false).item(), 0.0f);
}

TEST(DetectionOps, RoiAlignPicksTheImageOfEachRoi) {
  // Two images, constant 1 and 2, two channels (the second doubled).
  std::vector<float> v;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 16; ++i) v.push_back(static_cast<float>((n + 1) * (c + 1)));
  const Tensor x = Tensor::from_vector({2, 2, 4, 4}, v);
  const Tensor y = ops::roi_align(x, rois_of({{1, 0, 0, 2, 2}, {0, 1, 1, 3, 3}}), 1, 1, 1.0f, 2, false);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 1, 1}));
  EXPECT_EQ(y.to_vector(), (std::vector<float>{2, 4, 1, 2}));
}

TEST(DetectionOps, RoiAlignGradients) {
  struct Case {
    const char* name;
    int64_t pooled, sampling;
    bool aligned;
    float scale;
  };
  const Tensor rois = rois_of({{0, 1.3f, 0.7f, 9.1f, 6.2f},
                               {1, -3.0f, -2.0f, 5.0f, 4.0f},    // partly outside
                               {0, 4.0f, 4.0f, 4.5f, 4.2f},      // smaller than a cell
                               {1, 2.2f, 3.1f, 13.9f, 12.5f}});  // beyond the right border
  const Case cases[] = {{"original_s2", 3, 2, false, 0.5f},
                        {"aligned", 2, 2, true, 0.5f},
                        {"adaptive", 2, 0, false, 0.5f},
                        {"scale1", 2, 1, false, 1.0f}};
  uint64_t seed = 40;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor x = rand_tensor({2, 3, 6, 7}, seed++);
    EXPECT_GRADCHECK(gradcheck(
        [&](const std::vector<Tensor>& t) {
          return ops::roi_align(t[0], rois, c.pooled, c.pooled, c.scale, c.sampling, c.aligned);
        },
        {x}));
  }
}

TEST(DetectionOps, RoiAlignTakesBlockedInputAndGivesItsGradientBack) {
  Tensor x = rand_tensor({1, 10, 5, 6}, 50);
  const Tensor rois = rois_of({{0, 0.5f, 0.5f, 7.0f, 6.0f}, {0, 3.0f, 1.0f, 11.0f, 9.0f}});
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) {
        return ops::roi_align(ops::to_layout(t[0], Layout::blocked(8)), rois, 2, 2, 0.5f, 2, false);
      },
      {x}));
  const Tensor plain = ops::roi_align(x.detach(), rois, 3, 3, 0.5f);
  const Tensor blocked = ops::roi_align(ops::to_layout(x.detach(), Layout::blocked(8)), rois, 3, 3, 0.5f);
  EXPECT_TRUE(blocked.layout().is_plain());
  EXPECT_EQ(plain.to_vector(), blocked.to_vector());
}

// The CPU kernels work on channels-last feature maps: a one-channel map (plain and
// channels-last the same bytes) both ways, and a channels-last input taken as it is.
TEST(DetectionOps, RoiAlignOnOneChannelAndOnChannelsLastInput) {
  const Tensor rois = rois_of({{0, 0.5f, 0.5f, 7.0f, 6.0f}, {1, 3.0f, 1.0f, 11.0f, 9.0f}});
  Tensor x1 = rand_tensor({2, 1, 5, 6}, 53);
  EXPECT_GRADCHECK(
      gradcheck([&](const std::vector<Tensor>& t) { return ops::roi_align(t[0], rois, 2, 2, 0.5f, 2, false); }, {x1}));
  auto& be = backend_for(Device::cpu());
  const Tensor x = rand_tensor({2, 5, 5, 6}, 54, false);
  const Tensor y = be.roi_align_forward(x, rois, 3, 3, 0.5f, 2, false);
  const Tensor y_cl = be.roi_align_forward(be.to_layout(x, Layout::channels_last()), rois, 3, 3, 0.5f, 2, false);
  EXPECT_TRUE(y_cl.layout().is_plain());
  EXPECT_EQ(y.to_vector(), y_cl.to_vector());
}

TEST(DetectionOps, RoiAlignBackwardIsFirstOrderOnly) {
  Tensor x = rand_tensor({1, 2, 4, 4}, 51);
  const Tensor rois = rois_of({{0, 0, 0, 3, 3}});
  Tensor loss = ops::sum(ops::mul(ops::roi_align(x, rois, 2, 2, 1.0f), ops::roi_align(x, rois, 2, 2, 1.0f)));
  auto g = grad({loss}, {x}, {}, /*create_graph=*/true);
  ASSERT_TRUE(g[0].requires_grad());
  EXPECT_THROW(grad({ops::sum(g[0])}, {x}), std::logic_error);
}

TEST(DetectionOps, RoiOpsRejectBadArguments) {
  const Tensor x = rand_tensor({1, 2, 4, 4}, 52, false);
  EXPECT_THROW(ops::roi_align(x, Tensor::zeros({1, 4}, Device::cpu()), 2, 2, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::roi_align(x, rois_of({{1, 0, 0, 2, 2}}), 2, 2, 1.0f), std::invalid_argument);  // no image 1
  EXPECT_THROW(ops::roi_align(x, rois_of({{0.5f, 0, 0, 2, 2}}), 2, 2, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::roi_align(x, rois_of({{0, 0, 0, 2, 2}}), 0, 2, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::roi_pool(x, rois_of({{0, 0, 0, 2, 2}}), 2, 2, 0.0f), std::invalid_argument);
  EXPECT_THROW(ops::roi_align(rand_tensor({2, 4, 4}, 1, false), rois_of({{0, 0, 0, 2, 2}}), 2, 2, 1.0f),
               std::invalid_argument);
  Tensor rois_grad = rois_of({{0, 0, 0, 2, 2}});
  rois_grad.set_requires_grad(true);
  EXPECT_THROW(ops::roi_align(x, rois_grad, 2, 2, 1.0f), std::invalid_argument);
}

// ---------------------------------------------------------------- RoIPool

TEST(DetectionOps, RoiPoolTakesTheMaxOfEachRoundedBin) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  const Tensor x = Tensor::from_vector({1, 1, 4, 4}, v);
  // Cells 0..3 inclusive (4 wide), 2x2 bins of two cells: the max of each quadrant.
  EXPECT_EQ(ops::roi_pool(x, rois_of({{0, 0, 0, 3, 3}}), 2, 2, 1.0f).to_vector(), (std::vector<float>{5, 7, 13, 15}));
  // Fast R-CNN rounds: 0.4 -> 0 and 2.6 -> 3 at scale 1; at scale 0.5, pixels 2..6 -> cells 1..3.
  EXPECT_EQ(ops::roi_pool(x, rois_of({{0, 0.4f, 0.4f, 2.6f, 2.6f}}), 2, 2, 1.0f).to_vector(),
            (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(ops::roi_pool(x, rois_of({{0, 2, 2, 6, 6}}), 1, 1, 0.5f).to_vector(), (std::vector<float>{15}));
  // A bin entirely outside the map is empty: 0.
  EXPECT_EQ(ops::roi_pool(x, rois_of({{0, 8, 8, 9, 9}}), 1, 1, 1.0f).to_vector(), (std::vector<float>{0}));
}

TEST(DetectionOps, RoiPoolGradients) {
  // Distinct values: no ties, so the max is differentiable at the checked points.
  Tensor x = distinct_values({2, 3, 6, 6}, 60, 0.05f);
  const Tensor rois = rois_of({{0, 0, 0, 7, 9}, {1, 2.4f, 1.2f, 11, 11}, {1, -4, -4, 3, 3}, {0, 5, 5, 5, 5}});
  EXPECT_GRADCHECK(gradcheck([&](const std::vector<Tensor>& t) { return ops::roi_pool(t[0], rois, 3, 2, 0.5f); }, {x},
                             GradcheckOptions{.eps = 1e-3}));
  // Overlapping RoIs route their gradients to the same maxima: they add.
  Tensor y = ops::sum(ops::roi_pool(x, rois_of({{0, 0, 0, 11, 11}, {0, 0, 0, 11, 11}}), 1, 1, 0.5f));
  const auto g = grad({y}, {x})[0].to_vector();
  double total = 0;
  for (float v : g) total += v;
  EXPECT_DOUBLE_EQ(total, 6.0);  // 2 RoIs x 3 channels, one max each
}

// ---------------------------------------------------------------- smooth L1

TEST(DetectionOps, SmoothL1KnownValues) {
  const Tensor x = Tensor::from_vector({3}, {0.0f, 0.5f, -2.0f});
  const Tensor t = Tensor::zeros({3}, Device::cpu());
  // beta 1: 0, 0.5 * 0.25 = 0.125, 2 - 0.5 = 1.5.
  EXPECT_FLOAT_EQ(ops::smooth_l1_loss(x, t, Tensor(), 1.0f).item(), 1.625f);
  EXPECT_FLOAT_EQ(ops::smooth_l1_loss(x, t, Tensor(), 1.0f, 4.0f).item(), 1.625f / 4);
  // Weights mask elements: 2 * 0.125.
  EXPECT_FLOAT_EQ(ops::smooth_l1_loss(x, t, Tensor::from_vector({3}, {1, 2, 0}), 1.0f).item(), 0.25f);
  // beta 1/9 (the RPN's): 0.5 and 2 are in the linear zone: 0.5 - 1/18 + 2 - 1/18.
  EXPECT_NEAR(ops::smooth_l1_loss(x, t, Tensor(), 1.0f / 9).item(), 2.5 - 1.0 / 9, 1e-6);
  // beta 0 is L1.
  EXPECT_FLOAT_EQ(ops::smooth_l1_loss(x, t, Tensor(), 0.0f).item(), 2.5f);
}

TEST(DetectionOps, SmoothL1Gradients) {
  // |x - t| kept away from beta's kink and from 0.
  Tensor x = away_from_zero({4, 4}, 70);
  Tensor t = rand_tensor({4, 4}, 71, true, -0.05f, 0.05f);
  const Tensor w = rand_tensor({4, 4}, 72, false, 0.0f, 2.0f);
  for (float beta : {1.0f, 1.0f / 9, 0.0f}) {
    SCOPED_TRACE(beta);
    EXPECT_GRADCHECK(
        gradcheck([&](const std::vector<Tensor>& in) { return ops::smooth_l1_loss(in[0], in[1], w, beta, 3.0f); },
                  {x, t}, GradcheckOptions{.eps = 1e-3}));
  }
  Tensor wg = w.detach();
  wg.set_requires_grad(true);
  EXPECT_THROW(ops::smooth_l1_loss(x, t, wg, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::smooth_l1_loss(x, t, w, 1.0f, 0.0f), std::invalid_argument);
  EXPECT_THROW(ops::smooth_l1_loss(x, rand_tensor({16}, 1), Tensor(), 1.0f), std::invalid_argument);
}

// ---------------------------------------------------------------- rows

TEST(DetectionOps, IndexSelectAndAddRowsKnownValues) {
  const Tensor x = Tensor::from_vector({3, 2}, {0, 1, 10, 11, 20, 21});
  const Tensor idx = Tensor::from_vector({4}, {2, 0, 2, 1});
  EXPECT_EQ(ops::index_select_rows(x, idx).to_vector(), (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11}));
  const Tensor src = Tensor::from_vector({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  // Rows 0 and 2 of src both land in row 2.
  EXPECT_EQ(ops::index_add_rows(src, idx, 4).to_vector(), (std::vector<float>{3, 4, 7, 8, 6, 8, 0, 0}));
  EXPECT_THROW(ops::index_select_rows(x, Tensor::from_vector({1}, {3})), std::invalid_argument);
  EXPECT_THROW(ops::index_select_rows(x, Tensor::from_vector({1}, {-1})), std::invalid_argument);
  EXPECT_THROW(ops::index_select_rows(x, Tensor::from_vector({1}, {0.5f})), std::invalid_argument);
  EXPECT_THROW(ops::index_add_rows(src, idx, 2), std::invalid_argument);
}

TEST(DetectionOps, IndexRowsGradientsFirstAndSecondOrder) {
  const Tensor idx = Tensor::from_vector({5}, {3, 0, 3, 1, 3});
  Tensor x = rand_tensor({4, 3}, 80);
  EXPECT_GRADCHECK(gradcheck([&](const std::vector<Tensor>& t) { return ops::index_select_rows(t[0], idx); }, {x}));
  Tensor src = rand_tensor({5, 3}, 81);
  EXPECT_GRADCHECK(gradcheck([&](const std::vector<Tensor>& t) { return ops::index_add_rows(t[0], idx, 6); }, {src}));
  // Through a non-linearity, so the second-order terms are not trivially zero.
  EXPECT_GRADCHECK(gradgradcheck(
      [&](const std::vector<Tensor>& t) {
        const Tensor y = ops::index_select_rows(t[0], idx);
        return ops::mul(y, y);
      },
      {x}));
  // Higher-rank rows: [N, 2, 2].
  Tensor x3 = rand_tensor({3, 2, 2}, 82);
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) {
        return ops::index_select_rows(t[0], Tensor::from_vector({2}, {2, 2}));
      },
      {x3}));
}

// ---------------------------------------------------------------- permute

TEST(DetectionOps, PermuteNchwToNhwc) {
  // [1, 2, 2, 3]: channel c, row h, column w holds 100 c + 10 h + w.
  std::vector<float> v;
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w) v.push_back(static_cast<float>(100 * c + 10 * h + w));
  const Tensor x = Tensor::from_vector({1, 2, 2, 3}, v);
  const Tensor y = ops::permute(x, {0, 2, 3, 1});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 3, 2}));
  EXPECT_EQ(y.to_vector(), (std::vector<float>{0, 100, 1, 101, 2, 102, 10, 110, 11, 111, 12, 112}));
  // Blocked input: the same values.
  EXPECT_EQ(ops::permute(ops::to_layout(x, Layout::blocked(8)), {0, 2, 3, 1}).to_vector(), y.to_vector());
  // And back.
  EXPECT_EQ(ops::permute(y, {0, 3, 1, 2}).to_vector(), v);
  EXPECT_THROW(ops::permute(x, {0, 1, 2}), std::invalid_argument);
  EXPECT_THROW(ops::permute(x, {0, 1, 1, 2}), std::invalid_argument);
}

TEST(DetectionOps, PermuteGradientsFirstAndSecondOrder) {
  Tensor x = rand_tensor({2, 3, 2, 4}, 90);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::permute(t[0], {0, 2, 3, 1}); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::permute(t[0], {3, 1, 0, 2}); }, {x}));
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) {
        const Tensor y = ops::permute(t[0], {1, 0, 3, 2});
        return ops::mul(y, y);
      },
      {x}));
}

}  // namespace
}  // namespace ts::engine
