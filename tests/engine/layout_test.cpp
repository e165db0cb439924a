// The layout family (engine/ops/layout.cpp): to_layout, reshape and flatten, concat, slice and
// split, the row gather/scatter and permute: known values and finite-difference gradients (second
// order where the backward is differentiable), and the CPU backend's fill, copy and reorders.
#include <gtest/gtest.h>

#include <vector>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/gradcheck.h"
#include "engine/ops.h"
#include "on_every_device.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

class LayoutOps : public OnDevice {};

TEST_P(LayoutOps, ConcatChannelsAndBatch) {
  Tensor a = rand_tensor({2, 3, 2, 2}, 80);
  Tensor b = rand_tensor({2, 5, 2, 2}, 81);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::concat({t[0], t[1]}, 1); }, {a, b}));
  Tensor c = rand_tensor({1, 3, 2, 2}, 82);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::concat({t[0], t[1]}, 0); }, {a, c}));
  // Blocked inputs whose channel counts are multiples of the block stay blocked.
  Tensor d = rand_tensor({1, 8, 2, 2}, 83);
  Tensor e = rand_tensor({1, 16, 2, 2}, 84);
  auto blocked_concat = [](const std::vector<Tensor>& t) {
    return ops::concat({ops::to_layout(t[0], Layout::blocked(8)), ops::to_layout(t[1], Layout::blocked(8))}, 1);
  };
  EXPECT_GRADCHECK(gradcheck(blocked_concat, {d, e}));
  // Not multiples: falls back to plain, values still right.
  Tensor f = rand_tensor({1, 3, 2, 2}, 85);
  EXPECT_GRADCHECK(gradcheck(blocked_concat, {d, f}));
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) {
        return ops::mul(ops::concat({t[0], t[1]}, 1), ops::concat({t[1], t[0]}, 1));
      },
      {a, rand_tensor({2, 3, 2, 2}, 88)}));
}

TEST_P(LayoutOps, Slice) {
  Tensor x = rand_tensor({2, 10, 3, 3}, 86);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::slice(t[0], 1, 2, 5); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::slice(t[0], 0, 1, 1); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::slice(t[0], 3, 0, 2); }, {x}));
  Tensor xb = rand_tensor({1, 24, 2, 2}, 87);
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::slice(ops::to_layout(t[0], Layout::blocked(8)), 1, 8, 16); },
      {xb}));
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::slice(ops::to_layout(t[0], Layout::blocked(8)), 1, 3, 7); },
      {xb}));
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) { return ops::mul(ops::slice(t[0], 1, 2, 5), ops::slice(t[0], 1, 4, 5)); },
      {x}));
  EXPECT_THROW(ops::slice(on(x), 1, 8, 5), std::invalid_argument);
}

TEST_P(LayoutOps, FlattenReshapeToLayout) {
  Tensor x = rand_tensor({2, 10, 3, 3}, 90);
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::flatten(t[0]); }, {x}));
  EXPECT_GRADCHECK(gradcheck([](const std::vector<Tensor>& t) { return ops::reshape(t[0], {5, 36}); }, {x}));
  EXPECT_GRADCHECK(gradcheck(
      [](const std::vector<Tensor>& t) { return ops::flatten(ops::to_layout(t[0], Layout::blocked(8))); }, {x}));
  for (Layout l : {Layout::blocked(8), Layout::blocked(16), Layout::channels_last()}) {
    EXPECT_GRADCHECK(gradcheck([l](const std::vector<Tensor>& t) { return ops::to_layout(t[0], l); }, {x}));
    EXPECT_GRADCHECK(gradgradcheck(
        [l](const std::vector<Tensor>& t) {
          Tensor y = ops::to_layout(t[0], l);
          return ops::mul(y, y);
        },
        {x}));
  }
  EXPECT_GRADCHECK(gradgradcheck(
      [](const std::vector<Tensor>& t) {
        Tensor y = ops::reshape(t[0], {18, 10});
        return ops::mul(y, y);
      },
      {x}));
  EXPECT_THROW(ops::reshape(on(x), {7, 7}), std::invalid_argument);
}

TEST_P(LayoutOps, PartsAndGradients) {
  Tensor x = rand_tensor({5, 3, 2}, 31);
  {
    NoGradScope no_grad;
    const auto parts = ops::split(on(x), 0, {2, 1, 2});
    ASSERT_EQ(parts.size(), 3u);
    const auto xv = x.to_vector();
    EXPECT_EQ(parts[1].shape(), (Shape{1, 3, 2}));
    const auto p2 = parts[2].to_vector();
    for (size_t i = 0; i < p2.size(); ++i) EXPECT_EQ(p2[i], xv[18 + i]);
    const auto cols = ops::split(on(x), 1, {1, 2});
    EXPECT_EQ(cols[1].shape(), (Shape{5, 2, 2}));
    EXPECT_EQ(cols[1].to_vector()[0], xv[2]);
  }
  // Every part used, some twice, one not at all (its gradient counts as zeros).
  auto f = [](const std::vector<Tensor>& t) {
    const auto p = ops::split(t[0], 0, {1, 2, 1, 1});
    return ops::concat({ops::mul(p[0], p[0]), ops::scale(p[1], 3.0f), p[3], p[0]}, 0);
  };
  EXPECT_GRADCHECK(gradcheck(f, {x}));
  EXPECT_GRADCHECK(gradgradcheck(f, {x}));
  const auto g = grad({ops::sum(ops::split(on(x), 0, {1, 2, 1, 1})[1])}, {x})[0].to_vector();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], (i >= 6 && i < 18) ? 1.0f : 0.0f) << i;
  EXPECT_THROW(ops::split(on(x), 0, {2, 2}), std::invalid_argument);
  EXPECT_THROW(ops::split(on(x), 3, {5}), std::invalid_argument);
}

TEST_P(LayoutOps, IndexSelectAndAddRowsKnownValues) {
  const Tensor x = on(Tensor::from_vector({3, 2}, {0, 1, 10, 11, 20, 21}));
  const Tensor idx = on(Tensor::from_vector({4}, {2, 0, 2, 1}));
  EXPECT_EQ(ops::index_select_rows(x, idx).to_vector(), (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11}));
  const Tensor src = on(Tensor::from_vector({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  // Rows 0 and 2 of src both land in row 2.
  EXPECT_EQ(ops::index_add_rows(src, idx, 4).to_vector(), (std::vector<float>{3, 4, 7, 8, 6, 8, 0, 0}));
  EXPECT_THROW(ops::index_select_rows(x, on(Tensor::from_vector({1}, {3}))), std::invalid_argument);
  EXPECT_THROW(ops::index_select_rows(x, on(Tensor::from_vector({1}, {-1}))), std::invalid_argument);
  EXPECT_THROW(ops::index_select_rows(x, on(Tensor::from_vector({1}, {0.5f}))), std::invalid_argument);
  EXPECT_THROW(ops::index_add_rows(src, idx, 2), std::invalid_argument);
}

TEST_P(LayoutOps, IndexRowsGradientsFirstAndSecondOrder) {
  const Tensor idx = on(Tensor::from_vector({5}, {3, 0, 3, 1, 3}));
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
        return ops::index_select_rows(t[0], on(Tensor::from_vector({2}, {2, 2})));
      },
      {x3}));
}

TEST_P(LayoutOps, PermuteNchwToNhwc) {
  // [1, 2, 2, 3]: channel c, row h, column w holds 100 c + 10 h + w.
  std::vector<float> v;
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w) v.push_back(static_cast<float>(100 * c + 10 * h + w));
  const Tensor x = on(Tensor::from_vector({1, 2, 2, 3}, v));
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

TEST_P(LayoutOps, PermuteGradientsFirstAndSecondOrder) {
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

// The CPU keeps blocked inputs blocked where the channel counts are multiples of the block (the
// GPU computes in plain NCHW).
TEST(LayoutCpu, ConcatOfBlockedStaysBlocked) {
  Tensor d = rand_tensor({1, 8, 2, 2}, 83, false);
  Tensor e = rand_tensor({1, 16, 2, 2}, 84, false);
  EXPECT_EQ(ops::concat({ops::to_layout(d, Layout::blocked(8)), ops::to_layout(e, Layout::blocked(8))}, 1).layout(),
            Layout::blocked(8));
}

TEST(LayoutCpu, FillCopyLayouts) {
  auto& be = backend_for(Device::cpu());
  Tensor t = Tensor::empty({2, 10, 2, 2}, Device::cpu(), Layout::blocked(8));
  be.fill(t, 2.0f);
  EXPECT_NEAR(be.sum_all(t).item(), 2.0f * 80, 1e-4);  // padded channels stay zero
  Tensor x = rand_tensor({2, 10, 2, 2}, 40, false);
  Tensor c = Tensor::empty(x.shape(), Device::cpu(), Layout::channels_last());
  be.copy(x, c);
  EXPECT_EQ(c.to_vector(), x.to_vector());
  Tensor back = be.to_layout(be.to_layout(x, Layout::blocked(16)), Layout::plain());
  EXPECT_EQ(back.to_vector(), x.to_vector());
}

// With one channel (or 1x1 spatial) plain and channels-last are the same bytes: oneDNN's
// descriptors compare equal, so no reorder primitive exists and the layout change must not
// run one. Regression: to_layout and copy ran the uncreated primitive ("object is not initialized").
TEST(LayoutCpu, LayoutChangesWhereTheBytesAreTheSame) {
  auto& be = backend_for(Device::cpu());
  for (const Shape& s : {Shape{2, 1, 5, 7}, Shape{3, 6, 1, 1}, Shape{1, 1, 1, 1}}) {
    SCOPED_TRACE(shape_str(s));
    const Tensor x = rand_tensor(s, 43, false);
    const Tensor cl = be.to_layout(x, Layout::channels_last());
    EXPECT_EQ(cl.layout(), Layout::channels_last());
    EXPECT_EQ(cl.shape(), s);
    EXPECT_EQ(cl.to_vector(), x.to_vector());
    const Tensor back = be.to_layout(cl, Layout::plain());
    EXPECT_TRUE(back.layout().is_plain());
    EXPECT_EQ(back.to_vector(), x.to_vector());
    Tensor c = Tensor::empty(s, Device::cpu(), Layout::channels_last());
    be.copy(x, c);
    EXPECT_EQ(c.to_vector(), x.to_vector());
    Tensor p = Tensor::empty(s, Device::cpu(), Layout::plain());
    be.copy(c, p);
    EXPECT_EQ(p.to_vector(), x.to_vector());
    // Through the op, gradients come back in the input's layout.
    const Tensor xg = rand_tensor(s, 44, true);
    const Tensor y = ops::to_layout(xg, Layout::channels_last());
    ops::sum(ops::mul(y, y)).backward();
    ASSERT_TRUE(xg.grad().defined());
    EXPECT_TRUE(xg.grad().layout().is_plain());
    const std::vector<float> xv = xg.to_vector(), gv = xg.grad().to_vector();
    for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(gv[i], 2.0f * xv[i], 1e-5f);
  }
  // One channel into and out of a channel-blocked layout (padded, so a real reorder).
  const Tensor x = rand_tensor({2, 1, 3, 4}, 45, false);
  EXPECT_EQ(be.to_layout(be.to_layout(x, Layout::blocked(8)), Layout::channels_last()).to_vector(), x.to_vector());
}

TS_ON_EVERY_DEVICE(LayoutOps);

}  // namespace
}  // namespace ts::engine
