// CPU backend kernels at ResNet-50 shapes (mini-batch 16): convolution forward / backward-data
// / backward-weights with GFLOP/s counters, batch norm, relu, max pooling and the classifier.
// Inputs are in the layout the previous conv would hand over (what a real network sees).
#include <benchmark/benchmark.h>

#include <random>

#include "engine/cpu/cpu_backend.h"
#include "engine/tensor.h"

namespace {

using namespace ts::engine;

Tensor random(const Shape& s, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = u(rng);
  return Tensor::from_vector(s, v);
}

struct ConvShape {
  int64_t n, c, h, o, k, stride, pad;
};

const ConvShape kConvs[] = {
    {16, 64, 56, 64, 3, 1, 1},    // layer1 conv2
    {16, 256, 56, 64, 1, 1, 0},   // layer1 conv1 (after the first block)
    {16, 128, 28, 128, 3, 1, 1},  // layer2 conv2
    {16, 512, 7, 512, 3, 1, 1},   // layer4 conv2
    {16, 3, 224, 64, 7, 2, 3},    // stem
};

struct ConvSetup {
  Tensor x, w, dy;
  Conv2dParams p;
  double flops = 0;
};

ConvSetup setup(const ConvShape& s) {
  auto& be = cpu::cpu_backend();
  ConvSetup c;
  c.p.stride_h = c.p.stride_w = s.stride;
  c.p.pad_h = c.p.pad_w = s.pad;
  c.w = random({s.o, s.c, s.k, s.k}, 2, 0.1f);
  Tensor x = random({s.n, s.c, s.h, s.h}, 1);
  // The layout a producing conv would hand over (the stem's input stays plain).
  const Layout l =
      s.c == 3 ? Layout::plain() : be.conv_output_layout(x.shape(), Layout::plain(), c.w.shape(), false, c.p);
  c.x = be.to_layout(x, l);
  Tensor y = be.conv2d_forward(c.x, c.w, nullptr, c.p);
  c.dy = be.to_layout(random(y.shape(), 3), y.layout());
  c.flops = 2.0 * static_cast<double>(y.numel()) * static_cast<double>(s.c * s.k * s.k);
  return c;
}

void set_flops(benchmark::State& state, double flops) {
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ConvForward(benchmark::State& state) {
  const ConvShape& s = kConvs[state.range(0)];
  ConvSetup c = setup(s);
  auto& be = cpu::cpu_backend();
  for (auto _ : state) benchmark::DoNotOptimize(be.conv2d_forward(c.x, c.w, nullptr, c.p));
  set_flops(state, c.flops);
  state.SetLabel(be.conv_impl_info(c.x.shape(), c.x.layout(), c.w.shape(), false, c.p, 0));
}

void BM_ConvBackwardData(benchmark::State& state) {
  const ConvShape& s = kConvs[state.range(0)];
  ConvSetup c = setup(s);
  auto& be = cpu::cpu_backend();
  for (auto _ : state) benchmark::DoNotOptimize(be.conv2d_backward_data(c.dy, c.w, c.x.shape(), c.x.layout(), c.p));
  set_flops(state, c.flops);
  state.SetLabel(be.conv_impl_info(c.x.shape(), c.x.layout(), c.w.shape(), false, c.p, 1));
}

void BM_ConvBackwardWeights(benchmark::State& state) {
  const ConvShape& s = kConvs[state.range(0)];
  ConvSetup c = setup(s);
  auto& be = cpu::cpu_backend();
  for (auto _ : state)
    benchmark::DoNotOptimize(be.conv2d_backward_weights(c.x, c.dy, c.w.shape(), false, c.p, Layout::plain()));
  set_flops(state, c.flops);
  state.SetLabel(be.conv_impl_info(c.x.shape(), c.x.layout(), c.w.shape(), false, c.p, 2));
}

BENCHMARK(BM_ConvForward)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ConvBackwardData)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ConvBackwardWeights)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();

Tensor blocked_activation(const Shape& s) { return cpu::cpu_backend().to_layout(random(s, 5), Layout::blocked(8)); }

void BM_BatchNormForwardBackward(benchmark::State& state) {
  auto& be = cpu::cpu_backend();
  Tensor x = blocked_activation({16, 64, 56, 56});
  Tensor dy = blocked_activation({16, 64, 56, 56});
  Tensor g = random({64}, 6), b = random({64}, 7);
  for (auto _ : state) {
    BatchNormStats s = be.batch_norm_forward_train(x, g, b, 1e-5f);
    benchmark::DoNotOptimize(be.batch_norm_backward(dy, x, g, s.mean, s.var, 1e-5f, false));
  }
  state.SetBytesProcessed(state.iterations() * x.nbytes() * 5);  // x twice, y, dy, dx
}
BENCHMARK(BM_BatchNormForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReluForwardBackward(benchmark::State& state) {
  auto& be = cpu::cpu_backend();
  Tensor x = blocked_activation({16, 64, 56, 56});
  Tensor dy = blocked_activation({16, 64, 56, 56});
  for (auto _ : state) {
    Tensor y = be.relu_forward(x);
    benchmark::DoNotOptimize(be.relu_backward(dy, y));
  }
  state.SetBytesProcessed(state.iterations() * x.nbytes() * 5);
}
BENCHMARK(BM_ReluForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MaxPoolForwardBackward(benchmark::State& state) {
  auto& be = cpu::cpu_backend();
  Tensor x = blocked_activation({16, 64, 112, 112});
  Pool2dParams p{3, 3, 2, 2, 1, 1, false};
  for (auto _ : state) {
    PoolResult r = be.max_pool2d_forward(x, p);
    benchmark::DoNotOptimize(be.max_pool2d_backward(r.y, r.workspace, x.shape(), x.layout(), p));
  }
}
BENCHMARK(BM_MaxPoolForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LinearForwardBackward(benchmark::State& state) {
  auto& be = cpu::cpu_backend();
  Tensor x = random({16, 2048}, 8), w = random({1000, 2048}, 9, 0.02f), b = random({1000}, 10);
  Tensor dy = random({16, 1000}, 11);
  for (auto _ : state) {
    benchmark::DoNotOptimize(be.linear_forward(x, w, &b));
    benchmark::DoNotOptimize(be.linear_backward_data(dy, w));
    benchmark::DoNotOptimize(be.linear_backward_weights(x, dy, true));
  }
  set_flops(state, 3 * 2.0 * 16 * 2048 * 1000);
}
BENCHMARK(BM_LinearForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
