// CPU-versus-GPU parity of the later Backend methods: tanh, nearest upsampling, the gradient
// penalty, Adam and the detection ops. Tolerances as in parity_test.cpp, plus:
//   kTranscendental 1e-5  tanhf, sqrtf and expf on the GPU against the host's libm (an ulp or two)
//   kAtomic         1e-5  backward passes that scatter with atomic adds (RoIAlign, RoIPool):
//                         the summation order differs from the CPU's and from run to run
#include <gtest/gtest.h>

#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"

namespace ts::engine {
namespace {

using namespace testing;

constexpr double kExact = 1e-6;
constexpr double kReduce = 1e-5;
constexpr double kTranscendental = 1e-5;
constexpr double kAtomic = 1e-5;

using CudaParityExtra = CudaTest;

Tensor rnd(const Shape& s, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return rand_tensor(s, seed, false, lo, hi);
}
Tensor in_layout_gpu(const Tensor& cpu_tensor, const Layout& l) {
  return gpu_be().to_layout(copy_to(cpu_tensor, gpu()), l);
}

TEST_F(CudaParityExtra, Tanh) {
  const Tensor x = rnd({2, 10, 3, 3}, 1, -3.0f, 3.0f), dy = rnd({2, 10, 3, 3}, 2);
  for (Layout l : {Layout::plain(), Layout::blocked(8), Layout::channels_last()}) {
    SCOPED_TRACE(l.str());
    const Tensor y = cpu_be().tanh_forward(x);
    const Tensor gy = gpu_be().tanh_forward(in_layout_gpu(x, l));
    EXPECT_EQ(gy.layout(), l);
    EXPECT_TRUE(close_to_cpu(gy, y, kTranscendental));
    const Tensor gdx = gpu_be().tanh_backward(copy_to(dy, gpu()), gy);
    EXPECT_EQ(gdx.layout(), l);
    EXPECT_TRUE(close_to_cpu(gdx, cpu_be().tanh_backward(dy, y), kTranscendental));
  }
}

TEST_F(CudaParityExtra, UpsampleNearest) {
  const Tensor x = rnd({2, 10, 3, 4}, 10);
  for (int64_t f : {1, 2, 3}) {
    for (Layout l : {Layout::plain(), Layout::channels_last(), Layout::blocked(8)}) {
      SCOPED_TRACE("factor " + std::to_string(f) + " " + l.str());
      const Tensor gy = gpu_be().upsample_nearest2d_forward(in_layout_gpu(x, l), f);
      EXPECT_EQ(gy.layout(), l);
      EXPECT_TRUE(close_to_cpu(gy, cpu_be().upsample_nearest2d_forward(x, f), kExact));
      const Tensor dy = rnd({2, 10, 3 * f, 4 * f}, 11 + static_cast<uint64_t>(f));
      const Tensor gdx = gpu_be().upsample_nearest2d_backward(in_layout_gpu(dy, l), f);
      EXPECT_EQ(gdx.layout(), l);
      EXPECT_TRUE(close_to_cpu(gdx, cpu_be().upsample_nearest2d_backward(dy, f), kExact));
    }
  }
  EXPECT_THROW(gpu_be().upsample_nearest2d_backward(copy_to(rnd({1, 1, 5, 4}, 1), gpu()), 2), std::invalid_argument);
  EXPECT_THROW(gpu_be().upsample_nearest2d_forward(copy_to(x, gpu()), 0), std::invalid_argument);
}

TEST_F(CudaParityExtra, NormPenalty) {
  std::vector<float> v = rnd({5, 37}, 20).to_vector();
  for (int k = 0; k < 37; ++k) v[static_cast<size_t>(2 * 37 + k)] = 0.0f;  // a zero row: norm 0, gradient 0
  const Tensor x = Tensor::from_vector({5, 37}, v);
  const Tensor gx = copy_to(x, gpu());
  for (float target : {1.0f, 0.0f}) {
    SCOPED_TRACE(target);
    const auto r = cpu_be().norm_penalty_forward(x, target);
    const auto gr = gpu_be().norm_penalty_forward(gx, target);
    EXPECT_TRUE(close_to_cpu(gr.loss, r.loss, kReduce));
    EXPECT_TRUE(close_to_cpu(gr.norms, r.norms, kReduce));
    const Tensor dloss = Tensor::from_vector({1}, {1.3f});
    EXPECT_TRUE(close_to_cpu(gpu_be().norm_penalty_backward(copy_to(dloss, gpu()), gx, gr.norms, target),
                             cpu_be().norm_penalty_backward(dloss, x, r.norms, target), kTranscendental));
  }
  EXPECT_THROW(gpu_be().norm_penalty_forward(copy_to(rnd({0, 3}, 1), gpu()), 1.0f), std::invalid_argument);
}

TEST_F(CudaParityExtra, AdamStep) {
  const Tensor w0 = rnd({1000}, 30), g0 = rnd({1000}, 31), m0 = rnd({1000}, 32, -0.1f, 0.1f),
               v0 = rnd({1000}, 33, 0.0f, 0.01f);
  for (int64_t step : {1, 7}) {
    SCOPED_TRACE(step);
    Tensor w = copy_to(w0, Device::cpu()), m = copy_to(m0, Device::cpu()), v = copy_to(v0, Device::cpu());
    Tensor gw = copy_to(w0, gpu()), gm = copy_to(m0, gpu()), gv = copy_to(v0, gpu());
    cpu_be().adam_step(w, g0, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
    gpu_be().adam_step(gw, copy_to(g0, gpu()), gm, gv, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
    EXPECT_TRUE(close_to_cpu(gw, w, kTranscendental));
    EXPECT_TRUE(close_to_cpu(gm, m, kExact));
    EXPECT_TRUE(close_to_cpu(gv, v, kExact));
  }
  Tensor gw = copy_to(w0, gpu());
  EXPECT_THROW(gpu_be().adam_step(gw, gw, gw, gw, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0), std::invalid_argument);
}

// ---------------------------------------------------------------- detection

Tensor rois_of(const std::vector<std::vector<float>>& rows) {
  std::vector<float> v;
  for (const auto& r : rows) v.insert(v.end(), r.begin(), r.end());
  return Tensor::from_vector({static_cast<int64_t>(rows.size()), 5}, v);
}

// RoIs of every kind: inside, degenerate, partly and far outside the map, both images.
Tensor test_rois() {
  return rois_of({{0, 1.3f, 2.1f, 15.7f, 11.2f},
                  {1, 0.0f, 0.0f, 19.0f, 23.0f},
                  {1, 5.0f, 5.0f, 5.0f, 5.0f},
                  {0, -6.0f, -3.0f, 7.5f, 9.0f},
                  {1, 12.0f, 14.0f, 40.0f, 50.0f},
                  {0, 30.0f, 30.0f, 44.0f, 48.0f}});
}

TEST_F(CudaParityExtra, RoiAlign) {
  const Tensor x = rnd({2, 4, 12, 10}, 40);
  const Tensor rois = test_rois();
  const Tensor gx = copy_to(x, gpu()), grois = copy_to(rois, gpu());
  for (int64_t ratio : {2, 0}) {
    for (bool aligned : {false, true}) {
      SCOPED_TRACE("ratio " + std::to_string(ratio) + (aligned ? " aligned" : ""));
      const Tensor y = cpu_be().roi_align_forward(x, rois, 3, 4, 0.5f, ratio, aligned);
      EXPECT_TRUE(close_to_cpu(gpu_be().roi_align_forward(gx, grois, 3, 4, 0.5f, ratio, aligned), y, kReduce));
      const Tensor dy = rnd(y.shape(), 41);
      EXPECT_TRUE(close_to_cpu(gpu_be().roi_align_backward(copy_to(dy, gpu()), grois, x.shape(), 0.5f, ratio, aligned),
                               cpu_be().roi_align_backward(dy, rois, x.shape(), 0.5f, ratio, aligned), kAtomic));
    }
  }
  // A blocked feature map is reordered first.
  EXPECT_TRUE(
      close_to_cpu(gpu_be().roi_align_forward(gpu_be().to_layout(gx, Layout::blocked(8)), grois, 2, 2, 0.5f, 2, false),
                   cpu_be().roi_align_forward(x, rois, 2, 2, 0.5f, 2, false), kReduce));
  // A batch index outside the feature batch: the CPU's error.
  EXPECT_THROW(gpu_be().roi_align_forward(gx, copy_to(rois_of({{2, 0, 0, 4, 4}}), gpu()), 2, 2, 1.0f, 2, false),
               std::invalid_argument);
}

TEST_F(CudaParityExtra, RoiPool) {
  const Tensor x = distinct_values({2, 3, 12, 10}, 50, 0.01f, false);
  const Tensor rois = test_rois();
  const Tensor gx = copy_to(x, gpu()), grois = copy_to(rois, gpu());
  for (float scale : {0.5f, 1.0f}) {
    SCOPED_TRACE(scale);
    const PoolResult r = cpu_be().roi_pool_forward(x, rois, 3, 2, scale);
    const PoolResult gr = gpu_be().roi_pool_forward(gx, grois, 3, 2, scale);
    EXPECT_TRUE(close_to_cpu(gr.y, r.y, kExact));
    EXPECT_TRUE(close_to_cpu(gr.workspace, r.workspace, kExact));  // argmax as fp32, the same contract
    EXPECT_EQ(gr.workspace.category(), memprof::Category::workspace);
    const Tensor dy = rnd(r.y.shape(), 51);
    EXPECT_TRUE(close_to_cpu(gpu_be().roi_pool_backward(copy_to(dy, gpu()), gr.workspace, grois, x.shape()),
                             cpu_be().roi_pool_backward(dy, r.workspace, rois, x.shape()), kAtomic));
  }
}

TEST_F(CudaParityExtra, SmoothL1) {
  const Tensor x = rnd({7, 4}, 60, -2.0f, 2.0f), t = rnd({7, 4}, 61, -2.0f, 2.0f), w = rnd({7, 4}, 62, 0.0f, 1.0f);
  const Tensor gx = copy_to(x, gpu()), gt = copy_to(t, gpu()), gw = copy_to(w, gpu());
  const Tensor dloss = Tensor::from_vector({1}, {0.8f});
  const Tensor gdloss = copy_to(dloss, gpu());
  for (float beta : {0.0f, 1.0f / 9.0f, 1.0f}) {
    for (bool weighted : {false, true}) {
      SCOPED_TRACE("beta " + std::to_string(beta) + (weighted ? " weighted" : ""));
      EXPECT_TRUE(close_to_cpu(gpu_be().smooth_l1_forward(gx, gt, weighted ? &gw : nullptr, beta, 0.25f),
                               cpu_be().smooth_l1_forward(x, t, weighted ? &w : nullptr, beta, 0.25f), kReduce));
      EXPECT_TRUE(close_to_cpu(gpu_be().smooth_l1_backward(gdloss, gx, gt, weighted ? &gw : nullptr, beta, 0.25f),
                               cpu_be().smooth_l1_backward(dloss, x, t, weighted ? &w : nullptr, beta, 0.25f), kExact));
    }
  }
  EXPECT_THROW(gpu_be().smooth_l1_forward(gx, copy_to(rnd({7, 3}, 1), gpu()), nullptr, 1.0f, 1.0f),
               std::invalid_argument);
}

TEST_F(CudaParityExtra, IndexRows) {
  const Tensor x = rnd({6, 3, 2}, 70);
  const Tensor index = Tensor::from_vector({5}, {4, 0, 4, 5, 1});  // repeated rows add up in index_add
  const Tensor gx = copy_to(x, gpu()), gi = copy_to(index, gpu());
  EXPECT_TRUE(close_to_cpu(gpu_be().index_select_rows(gx, gi), cpu_be().index_select_rows(x, index), kExact));
  const Tensor src = rnd({5, 3, 2}, 71);
  EXPECT_TRUE(close_to_cpu(gpu_be().index_add_rows(copy_to(src, gpu()), gi, 6), cpu_be().index_add_rows(src, index, 6),
                           kExact));
  EXPECT_EQ(gpu_be().index_select_rows(gx, copy_to(Tensor::from_vector({0}, {}), gpu())).shape(), (Shape{0, 3, 2}));
  EXPECT_THROW(gpu_be().index_select_rows(gx, copy_to(Tensor::from_vector({2}, {0, 6}), gpu())), std::invalid_argument);
  EXPECT_THROW(gpu_be().index_add_rows(copy_to(src, gpu()), gi, 5), std::invalid_argument);
}

TEST_F(CudaParityExtra, Permute) {
  const Tensor x4 = rnd({2, 3, 4, 5}, 80), x2 = rnd({7, 3}, 81), x5 = rnd({2, 1, 3, 2, 4}, 82);
  const std::pair<Tensor, std::vector<int64_t>> cases[] = {
      {x4, {0, 2, 3, 1}}, {x4, {3, 2, 1, 0}}, {x4, {0, 1, 2, 3}}, {x2, {1, 0}}, {x5, {4, 0, 3, 1, 2}}};
  for (const auto& [x, perm] : cases) {
    SCOPED_TRACE(shape_str(x.shape()));
    EXPECT_TRUE(close_to_cpu(gpu_be().permute(copy_to(x, gpu()), perm), cpu_be().permute(x, perm), kExact));
  }
  EXPECT_TRUE(close_to_cpu(gpu_be().permute(in_layout_gpu(x4, Layout::blocked(8)), {0, 2, 3, 1}),
                           cpu_be().permute(x4, {0, 2, 3, 1}), kExact));
  EXPECT_THROW(gpu_be().permute(copy_to(x4, gpu()), {0, 1, 1, 2}), std::invalid_argument);
}

}  // namespace
}  // namespace ts::engine
