// The roi family (engine/ops/roi.cpp): RoIAlign and RoIPool, known answers worked out by hand
// and finite-difference gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class RoiOps : public OnDevice {};

// A [1, 1, H, W] map whose value is its column index (or its row index): bilinear
// interpolation reproduces linear functions exactly, so RoIAlign's bins average the sample
// coordinates.
Tensor ramp(int64_t h, int64_t w, bool by_column) {
  std::vector<float> v(static_cast<size_t>(h * w));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) v[static_cast<size_t>(y * w + x)] = static_cast<float>(by_column ? x : y);
  return Tensor::from_vector({1, 1, h, w}, v);
}

TEST_P(RoiOps, RoiAlignAveragesBilinearSamples) {
  // RoI x 1..5 on an 8x8 map, 2x2 bins of 2 cells, 2x2 samples per bin at 0.5 and 1.5 cells
  // into the bin: bin 0 samples x = 1.5, 2.5 (mean 2), bin 1 x = 3.5, 4.5 (mean 4).
  const Tensor cols = on(ramp(8, 8, true)), rows = on(ramp(8, 8, false));
  const Tensor r = on(rois_of({{0, 1, 1, 5, 5}}));
  EXPECT_EQ(ops::roi_align(cols, r, 2, 2, 1.0f, 2, false).to_vector(), (std::vector<float>{2, 4, 2, 4}));
  EXPECT_EQ(ops::roi_align(rows, r, 2, 2, 1.0f, 2, false).to_vector(), (std::vector<float>{2, 2, 4, 4}));
  // spatial_scale 1/2: the same RoI in image pixels 2..10 maps onto cells 1..5.
  EXPECT_EQ(ops::roi_align(cols, on(rois_of({{0, 2, 2, 10, 10}})), 2, 2, 0.5f, 2, false).to_vector(),
            (std::vector<float>{2, 4, 2, 4}));
  // aligned: half a cell to the left; the RoI spans 0.5..4.5, bins at 1.5 and 3.5.
  EXPECT_EQ(ops::roi_align(cols, r, 2, 2, 1.0f, 2, true).to_vector(), (std::vector<float>{1.5f, 3.5f, 1.5f, 3.5f}));
  // Adaptive sampling (ratio 0): ceil(2 cells / bin) = 2 samples, the same answer.
  EXPECT_EQ(ops::roi_align(cols, r, 2, 2, 1.0f, 0, false).to_vector(), (std::vector<float>{2, 4, 2, 4}));
  // The original (aligned = false) stretches a degenerate RoI to one cell: x 3..4, one bin,
  // samples at 3.25 and 3.75.
  EXPECT_FLOAT_EQ(ops::roi_align(cols, on(rois_of({{0, 3, 3, 3, 3}})), 1, 1, 1.0f, 2, false).item(), 3.5f);
}

TEST_P(RoiOps, RoiAlignClampsAtTheBorderAndZeroesFarOutside) {
  const Tensor cols = on(ramp(4, 4, true));
  // Samples beyond the last cell clamp to it: x = 3.5 reads column 3.
  EXPECT_FLOAT_EQ(ops::roi_align(cols, on(rois_of({{0, 3, 0, 4, 1}})), 1, 1, 1.0f, 1, false).item(), 3.0f);
  // More than one cell outside the map: nothing.
  EXPECT_FLOAT_EQ(ops::roi_align(cols, on(rois_of({{0, 10, 10, 12, 12}})), 1, 1, 1.0f, 2, false).item(), 0.0f);
}

TEST_P(RoiOps, RoiAlignPicksTheImageOfEachRoi) {
  // Two images, constant 1 and 2, two channels (the second doubled).
  std::vector<float> v;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 16; ++i) v.push_back(static_cast<float>((n + 1) * (c + 1)));
  const Tensor x = on(Tensor::from_vector({2, 2, 4, 4}, v));
  const Tensor y = ops::roi_align(x, on(rois_of({{1, 0, 0, 2, 2}, {0, 1, 1, 3, 3}})), 1, 1, 1.0f, 2, false);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 1, 1}));
  EXPECT_EQ(y.to_vector(), (std::vector<float>{2, 4, 1, 2}));
}

TEST_P(RoiOps, RoiAlignGradients) {
  struct Case {
    const char* name;
    int64_t pooled, sampling;
    bool aligned;
    float scale;
  };
  const Tensor rois = on(rois_of({{0, 1.3f, 0.7f, 9.1f, 6.2f},
                                  {1, -3.0f, -2.0f, 5.0f, 4.0f},     // partly outside
                                  {0, 4.0f, 4.0f, 4.5f, 4.2f},       // smaller than a cell
                                  {1, 2.2f, 3.1f, 13.9f, 12.5f}}));  // beyond the right border
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

TEST_P(RoiOps, RoiAlignTakesBlockedInputAndGivesItsGradientBack) {
  Tensor x = rand_tensor({1, 10, 5, 6}, 50);
  const Tensor rois = on(rois_of({{0, 0.5f, 0.5f, 7.0f, 6.0f}, {0, 3.0f, 1.0f, 11.0f, 9.0f}}));
  EXPECT_GRADCHECK(gradcheck(
      [&](const std::vector<Tensor>& t) {
        return ops::roi_align(ops::to_layout(t[0], Layout::blocked(8)), rois, 2, 2, 0.5f, 2, false);
      },
      {x}));
  const Tensor plain = ops::roi_align(on(x.detach()), rois, 3, 3, 0.5f);
  const Tensor blocked = ops::roi_align(ops::to_layout(on(x.detach()), Layout::blocked(8)), rois, 3, 3, 0.5f);
  EXPECT_TRUE(blocked.layout().is_plain());
  EXPECT_EQ(plain.to_vector(), blocked.to_vector());
}

// The CPU kernels work on channels-last feature maps: a one-channel map (plain and
// channels-last the same bytes) both ways, and a channels-last input taken as it is.
TEST(RoiCpu, RoiAlignOnOneChannelAndOnChannelsLastInput) {
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

TEST_P(RoiOps, RoiAlignBackwardIsFirstOrderOnly) {
  Tensor x = rand_tensor({1, 2, 4, 4}, 51);
  const Tensor rois = on(rois_of({{0, 0, 0, 3, 3}}));
  Tensor loss = ops::sum(ops::mul(ops::roi_align(on(x), rois, 2, 2, 1.0f), ops::roi_align(on(x), rois, 2, 2, 1.0f)));
  auto g = grad({loss}, {x}, {}, /*create_graph=*/true);
  ASSERT_TRUE(g[0].requires_grad());
  EXPECT_THROW(grad({ops::sum(g[0])}, {x}), std::logic_error);
}

TEST_P(RoiOps, RoiOpsRejectBadArguments) {
  const Tensor x = on(rand_tensor({1, 2, 4, 4}, 52, false));
  EXPECT_THROW(ops::roi_align(x, Tensor::zeros({1, 4}, device()), 2, 2, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::roi_align(x, on(rois_of({{1, 0, 0, 2, 2}})), 2, 2, 1.0f), std::invalid_argument);  // no image 1
  EXPECT_THROW(ops::roi_align(x, on(rois_of({{0.5f, 0, 0, 2, 2}})), 2, 2, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::roi_align(x, on(rois_of({{0, 0, 0, 2, 2}})), 0, 2, 1.0f), std::invalid_argument);
  EXPECT_THROW(ops::roi_pool(x, on(rois_of({{0, 0, 0, 2, 2}})), 2, 2, 0.0f), std::invalid_argument);
  EXPECT_THROW(ops::roi_align(on(rand_tensor({2, 4, 4}, 1, false)), on(rois_of({{0, 0, 0, 2, 2}})), 2, 2, 1.0f),
               std::invalid_argument);
  Tensor rois_grad = rois_of({{0, 0, 0, 2, 2}});
  rois_grad.set_requires_grad(true);
  EXPECT_THROW(ops::roi_align(x, on(rois_grad), 2, 2, 1.0f), std::invalid_argument);
}

TEST_P(RoiOps, RoiPoolTakesTheMaxOfEachRoundedBin) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  const Tensor x = on(Tensor::from_vector({1, 1, 4, 4}, v));
  // Cells 0..3 inclusive (4 wide), 2x2 bins of two cells: the max of each quadrant.
  EXPECT_EQ(ops::roi_pool(x, on(rois_of({{0, 0, 0, 3, 3}})), 2, 2, 1.0f).to_vector(),
            (std::vector<float>{5, 7, 13, 15}));
  // Fast R-CNN rounds: 0.4 -> 0 and 2.6 -> 3 at scale 1; at scale 0.5, pixels 2..6 -> cells 1..3.
  EXPECT_EQ(ops::roi_pool(x, on(rois_of({{0, 0.4f, 0.4f, 2.6f, 2.6f}})), 2, 2, 1.0f).to_vector(),
            (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(ops::roi_pool(x, on(rois_of({{0, 2, 2, 6, 6}})), 1, 1, 0.5f).to_vector(), (std::vector<float>{15}));
  // A bin entirely outside the map is empty: 0.
  EXPECT_EQ(ops::roi_pool(x, on(rois_of({{0, 8, 8, 9, 9}})), 1, 1, 1.0f).to_vector(), (std::vector<float>{0}));
}

TEST_P(RoiOps, RoiPoolGradients) {
  // Distinct values: no ties, so the max is differentiable at the checked points.
  Tensor x = distinct_values({2, 3, 6, 6}, 60, 0.05f);
  const Tensor rois = on(rois_of({{0, 0, 0, 7, 9}, {1, 2.4f, 1.2f, 11, 11}, {1, -4, -4, 3, 3}, {0, 5, 5, 5, 5}}));
  EXPECT_GRADCHECK(gradcheck([&](const std::vector<Tensor>& t) { return ops::roi_pool(t[0], rois, 3, 2, 0.5f); }, {x},
                             GradcheckOptions{.eps = 1e-3}));
  // Overlapping RoIs route their gradients to the same maxima: they add.
  Tensor y = ops::sum(ops::roi_pool(on(x), on(rois_of({{0, 0, 0, 11, 11}, {0, 0, 0, 11, 11}})), 1, 1, 0.5f));
  const auto g = grad({y}, {x})[0].to_vector();
  double total = 0;
  for (float v : g) total += v;
  EXPECT_DOUBLE_EQ(total, 6.0);  // 2 RoIs x 3 channels, one max each
}

TS_ON_EVERY_DEVICE(RoiOps);

}  // namespace
}  // namespace ts::engine
