// Forward values against naive loops, layouts, primitive cache, memory categories, optimizer
// and batch-norm statistics on the CPU backend.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/device_memory.h"
#include "engine/ops.h"
#include "memprof/ledger.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;
using cpu::cpu_backend;

TEST(CpuBackend, BackendForDevices) {
  EXPECT_STREQ(backend_for(Device::cpu()).name(), "cpu");
  EXPECT_EQ(&backend_for(Device::cpu()), &backend_for(Device::cpu()));
  EXPECT_THROW(backend_for(Device::meta()), std::runtime_error);
#ifndef TS_HAVE_CUDA
  EXPECT_THROW(backend_for(Device{DeviceType::cuda, 0}), std::runtime_error);   // the CUDA tests cover it otherwise
#endif
}

// The device-memory interface beside backend_for: the CPU always runs work, meta never; a GPU
// either can be used or says why not (no CUDA in the build, no driver, no device), on any machine.
TEST(CpuBackend, DeviceUsableAndMemoryFor) {
  std::string why = "unchanged";
  EXPECT_TRUE(device_usable(Device::cpu(), &why));
  EXPECT_FALSE(device_usable(Device::meta(), &why));
  EXPECT_NE(why.find("shapes only"), std::string::npos) << why;
  why.clear();
  if (!device_usable(Device{DeviceType::cuda, 0}, &why)) {
    EXPECT_FALSE(why.empty());
  }
  // Host memory is the CPU backend's, and no build has a 65th GPU.
  EXPECT_THROW(memory_for(Device::cpu()), std::runtime_error);
  EXPECT_THROW(memory_for(Device{DeviceType::cuda, 64}), std::runtime_error);
#ifndef TS_HAVE_CUDA
  EXPECT_THROW(memory_for(Device{DeviceType::cuda, 0}), std::runtime_error);
#else
  EXPECT_EQ(&memory_for(Device{DeviceType::cuda, 1}), &memory_for(Device{DeviceType::cuda, 1}));
#endif
}

TEST(CpuBackend, ConvForwardMatchesNaive) {
  struct Case { Shape x, w; Conv2dParams p; bool bias; };
  const Case cases[] = {
      {{2, 3, 7, 7}, {5, 3, 3, 3}, conv_params(1, 1), true},
      {{1, 3, 15, 15}, {8, 3, 7, 7}, conv_params(2, 3), false},
      {{2, 16, 6, 6}, {16, 16, 1, 1}, conv_params(1, 0), true},
      {{2, 16, 9, 9}, {8, 16, 3, 3}, conv_params(2, 1), false},
      {{1, 8, 6, 6}, {8, 4, 3, 3}, conv_params(1, 1, 1, 2), true},
      {{1, 16, 6, 6}, {16, 1, 3, 3}, conv_params(1, 1, 1, 16), false},
      {{1, 8, 9, 9}, {8, 8, 3, 3}, conv_params(1, 2, 2), true},
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w));
    Tensor x = rand_tensor(c.x, seed++, false);
    Tensor w = rand_tensor(c.w, seed++, false);
    Tensor b = c.bias ? rand_tensor({c.w[0]}, seed++, false) : Tensor();
    Tensor y = ops::conv2d(x, w, b, c.p);
    const auto bv = c.bias ? b.to_vector() : std::vector<float>();
    Shape ys;
    const auto ref = naive_conv2d(x.to_vector(), c.x, w.to_vector(), c.w, c.bias ? &bv : nullptr, c.p, &ys);
    EXPECT_EQ(y.shape(), ys);
    EXPECT_LT(max_rel_diff(y.to_vector(), ref), 1e-4);
  }
}

// Whatever layout oneDNN picks for a conv's output on this machine (blocks of 8 on AVX2, 16 on
// AVX-512), the next conv gives the same values from every layout it may be handed: both block
// sizes, channels-last and plain are forced here, so each is checked on any ISA.
TEST(CpuBackend, BlockedConvEqualsPlain) {
  Tensor x = rand_tensor({2, 16, 8, 8}, 7, false);
  Tensor w = rand_tensor({16, 16, 3, 3}, 8, false, -0.2f, 0.2f);
  const auto p = conv_params(1, 1);
  Tensor y = ops::conv2d(x, w, Tensor(), p);
  EXPECT_EQ(y.shape(), (Shape{2, 16, 8, 8}));
  Shape ys;
  const auto ref = naive_conv2d(x.to_vector(), x.shape(), w.to_vector(), w.shape(), nullptr, p, &ys);
  EXPECT_LT(max_rel_diff(y.to_vector(), ref), 1e-4) << y.layout().str();
  const auto plain = ops::conv2d(ops::to_layout(y, Layout::plain()), w, Tensor(), p).to_vector();
  for (Layout l : {Layout::blocked(8), Layout::blocked(16), Layout::channels_last(), y.layout()}) {
    SCOPED_TRACE(l.str());
    Tensor yl = ops::to_layout(y, l);
    EXPECT_EQ(yl.layout(), l);
    EXPECT_LT(max_rel_diff(ops::conv2d(yl, w, Tensor(), p).to_vector(), plain), 1e-5);
  }
  // Padded channels (C=10 in blocks of 8 and of 16) through relu/add stay zero: sums agree with plain.
  for (int block : {8, 16}) {
    SCOPED_TRACE(block);
    Tensor a = ops::to_layout(rand_tensor({2, 10, 3, 3}, 9, false), Layout::blocked(block));
    Tensor r = ops::relu(ops::add(a, a));
    EXPECT_NEAR(ops::sum(r).item(), ops::sum(ops::to_layout(r, Layout::plain())).item(), 1e-4);
  }
}

TEST(CpuBackend, ConvImplementationsAreNotReference) {
  auto& be = cpu_backend();
  struct Case { Shape x, w; Conv2dParams p; };
  const Case cases[] = {
      {{16, 64, 56, 56}, {64, 64, 3, 3}, conv_params(1, 1)},
      {{16, 256, 56, 56}, {64, 256, 1, 1}, conv_params(1, 0)},
      {{16, 3, 224, 224}, {64, 3, 7, 7}, conv_params(2, 3)},
  };
  for (const auto& c : cases) {
    for (Layout l : {Layout::plain(), Layout::blocked(8)}) {
      if (c.x[1] == 3 && !l.is_plain()) continue;
      for (int which = 0; which < 3; ++which) {
        if (c.x[1] == 3 && which == 1) continue;   // the first conv needs no data gradient
        const std::string impl = be.conv_impl_info(c.x, l, c.w, false, c.p, which);
        SCOPED_TRACE(shape_str(c.x) + " " + l.str() + " pass " + std::to_string(which) + ": " + impl);
        EXPECT_EQ(impl.find("ref"), std::string::npos);
      }
    }
  }
}

TEST(CpuBackend, PrimitiveCacheIsReused) {
  auto& be = cpu_backend();
  Tensor x = rand_tensor({2, 8, 6, 6}, 11);
  Tensor w = rand_tensor({8, 8, 3, 3}, 12);
  Tensor b = rand_tensor({8}, 13);
  auto step = [&] {
    Tensor y = ops::relu(ops::conv2d(x, w, b, conv_params(1, 1)));
    Tensor m = ops::max_pool2d(y, {2, 2, 2, 2, 0, 0, false});
    Tensor loss = ops::sum(ops::linear(ops::flatten(m), rand_tensor({3, 72}, 14, false), Tensor()));
    loss.backward();
  };
  step();
  const size_t after_first = be.cached_primitives();
  step();
  step();
  EXPECT_EQ(be.cached_primitives(), after_first);
  x.zero_grad();
  Tensor x2 = rand_tensor({3, 8, 6, 6}, 15, false);
  ops::conv2d(x2, w, b, conv_params(1, 1));
  EXPECT_GT(be.cached_primitives(), after_first);
}

TEST(CpuBackend, PoolForwardMatchesNaive) {
  Tensor x = rand_tensor({2, 3, 7, 7}, 20, false);
  const Pool2dParams cases[] = {{2, 2, 2, 2, 0, 0, false}, {3, 3, 2, 2, 1, 1, false}, {3, 3, 2, 2, 1, 1, true},
                                {3, 3, 1, 1, 1, 1, true}};
  for (const auto& p : cases) {
    for (bool is_max : {true, false}) {
      Shape ys;
      const auto ref = naive_pool2d(x.to_vector(), x.shape(), p, is_max, &ys);
      Tensor y = is_max ? ops::max_pool2d(x, p) : ops::avg_pool2d(x, p);
      EXPECT_EQ(y.shape(), ys);
      EXPECT_LT(max_rel_diff(y.to_vector(), ref), 1e-5) << "max=" << is_max << " k=" << p.kernel_h;
      Tensor yb = is_max ? ops::max_pool2d(ops::to_layout(x, Layout::blocked(8)), p)
                         : ops::avg_pool2d(ops::to_layout(x, Layout::blocked(8)), p);
      EXPECT_EQ(yb.layout(), Layout::blocked(8));
      EXPECT_LT(max_rel_diff(yb.to_vector(), ref), 1e-5);
    }
  }
}

TEST(CpuBackend, LinearMatchesNaive) {
  Tensor x = rand_tensor({5, 7}, 21, false);
  Tensor w = rand_tensor({4, 7}, 22, false);
  Tensor b = rand_tensor({4}, 23, false);
  const auto bv = b.to_vector();
  EXPECT_LT(max_rel_diff(ops::linear(x, w, b).to_vector(), naive_linear(x.to_vector(), 5, 7, w.to_vector(), 4, &bv)),
            1e-5);
  EXPECT_LT(max_rel_diff(ops::linear(x, w, Tensor()).to_vector(),
                         naive_linear(x.to_vector(), 5, 7, w.to_vector(), 4, nullptr)),
            1e-5);
}

TEST(CpuBackend, BatchNormEvalAndRunningStats) {
  const int64_t n = 3, c = 4, hw = 5;
  Tensor x = rand_tensor({n, c, hw, 1}, 30, false, -2.0f, 3.0f);
  Tensor g = rand_tensor({c}, 31, false, 0.5f, 1.5f);
  Tensor b = rand_tensor({c}, 32, false);
  Tensor rm = rand_tensor({c}, 33, false);
  Tensor rv = rand_tensor({c}, 34, false, 0.5f, 2.0f);
  const float eps = 1e-3f, momentum = 0.25f;
  const auto xv = x.to_vector(), gv = g.to_vector(), bv = b.to_vector(), rmv = rm.to_vector(), rvv = rv.to_vector();
  // Eval: (x - rm) / sqrt(rv + eps) * g + b.
  const auto y = ops::batch_norm(x, g, b, rm, rv, false, momentum, eps).to_vector();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t s = 0; s < hw; ++s) {
        const size_t j = static_cast<size_t>((i * c + k) * hw + s);
        const double ref = (xv[j] - rmv[k]) / std::sqrt(rvv[k] + eps) * gv[k] + bv[k];
        EXPECT_NEAR(y[j], ref, 1e-4);
      }
  // Eval in a blocked layout: same values.
  const auto yb = ops::batch_norm(ops::to_layout(x, Layout::blocked(8)), g, b, rm, rv, false, momentum, eps);
  EXPECT_EQ(yb.layout(), Layout::blocked(8));
  EXPECT_LT(max_rel_diff(yb.to_vector(), y), 1e-5);
  // Training: batch statistics, running stats updated (unbiased variance).
  const auto yt = ops::batch_norm(x, g, b, rm, rv, true, momentum, eps).to_vector();
  const auto rm2 = rm.to_vector(), rv2 = rv.to_vector();
  const double count = static_cast<double>(n * hw);
  for (int64_t k = 0; k < c; ++k) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < hw; ++s) mean += xv[static_cast<size_t>((i * c + k) * hw + s)];
    mean /= count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < hw; ++s) var += std::pow(xv[static_cast<size_t>((i * c + k) * hw + s)] - mean, 2);
    var /= count;
    EXPECT_NEAR(rm2[k], (1 - momentum) * rmv[k] + momentum * mean, 1e-5);
    EXPECT_NEAR(rv2[k], (1 - momentum) * rvv[k] + momentum * var * count / (count - 1), 1e-4);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < hw; ++s) {
        const size_t j = static_cast<size_t>((i * c + k) * hw + s);
        EXPECT_NEAR(yt[j], (xv[j] - mean) / std::sqrt(var + eps) * gv[k] + bv[k], 1e-4);
      }
  }
}

TEST(CpuBackend, SoftmaxCrossEntropyValues) {
  Tensor logits = Tensor::from_vector({2, 3}, {1.0f, 2.0f, 3.0f, 1000.0f, 0.0f, -1000.0f});
  Tensor labels = Tensor::from_vector({2}, {2, 1});
  const double l0 = -std::log(std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  const double l1 = 1000.0;   // stable log-sum-exp: no overflow
  EXPECT_NEAR(ops::softmax_cross_entropy(logits, labels).item(), (l0 + l1) / 2, 1e-3);
  try {
    ops::softmax_cross_entropy(logits, Tensor::from_vector({2}, {0, 3}));
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::softmax_cross_entropy(logits, Tensor::from_vector({2}, {0, -1})), std::invalid_argument);
  EXPECT_THROW(ops::softmax_cross_entropy(logits, Tensor::from_vector({3}, {0, 1, 1})), std::invalid_argument);
}

TEST(CpuBackend, SgdStep) {
  auto& be = backend_for(Device::cpu());
  const std::vector<float> w0{1.0f, -2.0f, 0.5f}, g0{0.1f, 0.2f, -0.3f}, b0{0.5f, 0.0f, -1.0f};
  const float lr = 0.1f, mom = 0.9f, wd = 0.01f;
  for (bool nesterov : {false, true}) {
    Tensor w = Tensor::from_vector({3}, w0), g = Tensor::from_vector({3}, g0), b = Tensor::from_vector({3}, b0);
    be.sgd_step(w, g, b, lr, mom, wd, nesterov);
    const auto wv = w.to_vector(), bv = b.to_vector();
    for (size_t i = 0; i < 3; ++i) {
      const float gi = g0[i] + wd * w0[i];
      const float bi = mom * b0[i] + gi;
      EXPECT_NEAR(bv[i], bi, 1e-6);
      EXPECT_NEAR(wv[i], w0[i] - lr * (nesterov ? gi + mom * bi : bi), 1e-6);
    }
  }
  Tensor w = Tensor::from_vector({3}, w0), g = Tensor::from_vector({3}, g0);
  be.sgd_step(w, g, Tensor(), lr, 0.0f, 0.0f, false);
  EXPECT_NEAR(w.to_vector()[1], w0[1] - lr * g0[1], 1e-6);
}

// Three Adam steps against the update written out in double precision.
TEST(CpuBackend, AdamStep) {
  auto& be = backend_for(Device::cpu());
  const std::vector<float> w0{1.0f, -2.0f, 0.5f, 0.0f};
  const std::vector<std::vector<float>> grads{{0.1f, 0.2f, -0.3f, 0.0f}, {0.2f, -0.1f, -0.3f, 1e-3f}, {-0.4f, 0.3f, 0.0f, 2.0f}};
  const double lr = 1e-2, b1 = 0.5, b2 = 0.9, eps = 1e-8, wd = 0.01;
  Tensor w = Tensor::from_vector({4}, w0);
  Tensor m = Tensor::zeros({4}, Device::cpu()), v = Tensor::zeros({4}, Device::cpu());
  std::vector<double> rw(w0.begin(), w0.end()), rm(4, 0.0), rv(4, 0.0);
  for (int64_t step = 1; step <= 3; ++step) {
    const auto& g0 = grads[static_cast<size_t>(step - 1)];
    be.adam_step(w, Tensor::from_vector({4}, g0), m, v, static_cast<float>(lr), static_cast<float>(b1),
                 static_cast<float>(b2), static_cast<float>(eps), static_cast<float>(wd), step);
    for (size_t i = 0; i < 4; ++i) {
      const double g = g0[i] + wd * rw[i];
      rm[i] = b1 * rm[i] + (1 - b1) * g;
      rv[i] = b2 * rv[i] + (1 - b2) * g * g;
      const double mhat = rm[i] / (1 - std::pow(b1, static_cast<double>(step)));
      const double vhat = rv[i] / (1 - std::pow(b2, static_cast<double>(step)));
      rw[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  const auto wv = w.to_vector(), mv = m.to_vector(), vv = v.to_vector();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(wv[i], rw[i], 1e-6) << i;
    EXPECT_NEAR(mv[i], rm[i], 1e-6) << i;
    EXPECT_NEAR(vv[i], rv[i], 1e-7) << i;
  }
  EXPECT_THROW(be.adam_step(w, w, m, v, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0), std::invalid_argument);
}

TEST(CpuBackend, FillCopyLayouts) {
  auto& be = backend_for(Device::cpu());
  Tensor t = Tensor::empty({2, 10, 2, 2}, Device::cpu(), Layout::blocked(8));
  be.fill(t, 2.0f);
  EXPECT_NEAR(be.sum_all(t).item(), 2.0f * 80, 1e-4);   // padded channels stay zero
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
TEST(CpuBackend, LayoutChangesWhereTheBytesAreTheSame) {
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

TEST(CpuBackend, MemoryCategories) {
  auto& ledger = memprof::Ledger::global();
  const auto act = static_cast<size_t>(memprof::Category::activations);
  const auto ws = static_cast<size_t>(memprof::Category::workspace);
  const int64_t before = ledger.current().bytes[act];
  {
    CategoryScope scope(memprof::Category::activations);
    Tensor t = Tensor::empty({1000}, Device::cpu());
    EXPECT_EQ(t.category(), memprof::Category::activations);
    EXPECT_EQ(ledger.current().bytes[act] - before, 4000);
  }
  EXPECT_EQ(ledger.current().bytes[act], before);

  // Max pooling's workspace and a conv's temporaries (input reorder, weights reorder,
  // scratchpad) are tagged workspace.
  {
    CategoryScope scope(memprof::Category::activations);
    Tensor x = rand_tensor({2, 16, 8, 8}, 41, false);
    PoolResult r = backend_for(Device::cpu()).max_pool2d_forward(x, {2, 2, 2, 2, 0, 0, false});
    EXPECT_EQ(r.workspace.category(), memprof::Category::workspace);
    EXPECT_EQ(r.y.category(), memprof::Category::activations);
    ledger.reset_peak();
    Tensor w = rand_tensor({32, 16, 3, 3}, 42, false);
    Tensor y = ops::conv2d(x, w, Tensor(), conv_params(1, 1));   // plain C=16 input: reordered
    EXPECT_GT(ledger.peak().bytes[ws], 0);
    EXPECT_EQ(y.category(), memprof::Category::activations);
  }
}

TEST(CpuBackend, BackwardGradientsInRightCategoriesAndLayouts) {
  Tensor x = rand_tensor({2, 16, 6, 6}, 50);
  Tensor w = rand_tensor({16, 16, 3, 3}, 51);
  Tensor y = ops::conv2d(ops::to_layout(x, Layout::blocked(8)), w, Tensor(), conv_params(1, 1));
  ops::mean(ops::relu(y)).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().category(), memprof::Category::weight_grads);
  EXPECT_TRUE(w.grad().layout().is_plain());
  EXPECT_EQ(x.grad().layout(), Layout::plain());
}

}  // namespace
}  // namespace ts::engine
