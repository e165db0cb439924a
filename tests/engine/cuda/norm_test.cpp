// The norm family on the GPU: CPU-versus-GPU parity of the CUDA backend's methods (the same inputs
// through both backends, compared element by element with cuda_test_util.h's tolerances) and
// the GPU's own argument checks. The family's test bodies run on the GPU too: ../norm_test.cpp.
#include <gtest/gtest.h>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/ops.h"

namespace ts::engine {
namespace {

using namespace testing;

using CudaNorm = CudaTest;

TEST_F(CudaNorm, BatchNorm) {
  struct Case {
    Shape x;
    float eps;
  };
  const Case cases[] = {{{4, 6, 5, 5}, 1e-5f}, {{2, 3, 7, 1}, 1e-3f}, {{8, 5}, 1e-5f}, {{16, 64, 4, 4}, 1e-5f}};
  uint64_t seed = 400;
  for (const auto& cs : cases) {
    SCOPED_TRACE(shape_str(cs.x));
    const int64_t c = cs.x[1];
    const Tensor x = rnd(cs.x, seed++, -2.0f, 3.0f), g = rnd({c}, seed++, 0.5f, 1.5f), b = rnd({c}, seed++);
    const Tensor gx = copy_to(x, gpu()), gg = copy_to(g, gpu()), gbeta = copy_to(b, gpu());
    const BatchNormStats s = cpu_be().batch_norm_forward_train(x, g, b, cs.eps);
    const BatchNormStats gs = gpu_be().batch_norm_forward_train(gx, gg, gbeta, cs.eps);
    EXPECT_TRUE(close_to_cpu(gs.y, s.y, kLibrary));
    EXPECT_TRUE(close_to_cpu(gs.mean, s.mean, kLibrary));
    EXPECT_TRUE(close_to_cpu(gs.var, s.var, kLibrary));  // biased, as the contract says

    const Tensor rm = rnd({c}, seed++), rv = rnd({c}, seed++, 0.5f, 2.0f);
    const Tensor grm = copy_to(rm, gpu()), grv = copy_to(rv, gpu());
    EXPECT_TRUE(close_to_cpu(gpu_be().batch_norm_forward_eval(gx, gg, gbeta, grm, grv, cs.eps),
                             cpu_be().batch_norm_forward_eval(x, g, b, rm, rv, cs.eps), kLibrary));

    const Tensor dy = rnd(cs.x, seed++);
    const Tensor gdy = copy_to(dy, gpu());
    for (bool global : {false, true}) {
      SCOPED_TRACE(global ? "global stats" : "batch stats");
      const Tensor& m = global ? rm : s.mean;
      const Tensor& v = global ? rv : s.var;
      const Tensor& gm = global ? grm : gs.mean;
      const Tensor& gv = global ? grv : gs.var;
      const BatchNormGrads r = cpu_be().batch_norm_backward(dy, x, g, m, v, cs.eps, global);
      const BatchNormGrads gr = gpu_be().batch_norm_backward(gdy, gx, gg, gm, gv, cs.eps, global);
      EXPECT_TRUE(close_to_cpu(gr.dx, r.dx, kLibrary));
      EXPECT_TRUE(close_to_cpu(gr.dgamma, r.dgamma, kLibrary));
      EXPECT_TRUE(close_to_cpu(gr.dbeta, r.dbeta, kLibrary));
    }
  }
  // A blocked input: same values, dx in the input's layout.
  const Tensor x = rnd({2, 10, 3, 3}, 450), g = rnd({10}, 451, 0.5f, 1.5f), b = rnd({10}, 452);
  const Tensor gxb = gpu_be().to_layout(copy_to(x, gpu()), Layout::blocked(8));
  const BatchNormStats s = cpu_be().batch_norm_forward_train(x, g, b, 1e-5f);
  const BatchNormStats gs = gpu_be().batch_norm_forward_train(gxb, copy_to(g, gpu()), copy_to(b, gpu()), 1e-5f);
  EXPECT_TRUE(close_to_cpu(gs.y, s.y, kLibrary));
  const BatchNormGrads gr = gpu_be().batch_norm_backward(copy_to(rnd(x.shape(), 453), gpu()), gxb, copy_to(g, gpu()),
                                                         gs.mean, gs.var, 1e-5f, false);
  EXPECT_EQ(gr.dx.layout(), Layout::blocked(8));
}

TEST_F(CudaNorm, LayerNorm) {
  for (const Shape& s : {Shape{7, 33}, Shape{64, 512}, Shape{1, 1}}) {
    SCOPED_TRACE(shape_str(s));
    const Tensor x = rnd(s, 1, -2.0f, 3.0f), g = rnd({s[1]}, 2, 0.5f, 1.5f), b = rnd({s[1]}, 3);
    const auto r = cpu_be().layer_norm_forward(x, g, b, 1e-5f);
    const auto gr = gpu_be().layer_norm_forward(up(x), up(g), up(b), 1e-5f);
    EXPECT_TRUE(close_to_cpu(gr.y, r.y, kReduce));
    EXPECT_TRUE(close_to_cpu(gr.mean, r.mean, kReduce));
    EXPECT_TRUE(close_to_cpu(gr.rstd, r.rstd, kReduce));
    const Tensor dy = rnd(s, 4);
    const BatchNormGrads d = cpu_be().layer_norm_backward(dy, x, g, r.mean, r.rstd);
    const BatchNormGrads gd = gpu_be().layer_norm_backward(up(dy), up(x), up(g), gr.mean, gr.rstd);
    EXPECT_TRUE(close_to_cpu(gd.dx, d.dx, kReduce));
    EXPECT_TRUE(close_to_cpu(gd.dgamma, d.dgamma, kReduce));
    EXPECT_TRUE(close_to_cpu(gd.dbeta, d.dbeta, kReduce));
  }
}

}  // namespace
}  // namespace ts::engine
