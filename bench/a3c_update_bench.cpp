// The A3C learner's update alone, the same work as bench/pytorch/a3c_update.py: forward and
// backward of the network on one t_max-step rollout of 84x84x4 frames (played by a random
// policy on the preset's game), gradient-norm clipping, and the shared RMSProp step.
// Arguments: preset (0 tiny, 1 full: small has the full network too) and op threads (a
// learner runs its ops on 1). Compare with
//   python3 bench/pytorch/a3c_update.py --preset full --threads 1
#include <benchmark/benchmark.h>

#include <vector>

#include "engine/context.h"
#include "engine/optim/clip.h"
#include "engine/optim/rmsprop.h"
#include "engine/random.h"
#include "workloads/a3c/a3c.h"

namespace {

using namespace ts;
using namespace ts::workloads;

Rollout random_rollout(const A3cConfig& c, uint64_t seed) {
  Breakout game(c.game, seed);
  engine::Rng policy(seed + 1);
  Rollout r;
  std::vector<float> obs(static_cast<size_t>(Breakout::kStack * Breakout::kFramePixels));
  game.step(Breakout::kFire);
  for (int64_t t = 0; t < c.t_max; ++t) {
    game.observation(obs.data());
    r.states.insert(r.states.end(), obs.begin(), obs.end());
    const int a = static_cast<int>(policy.integer(Breakout::kActions));
    r.actions.push_back(a);
    r.rewards.push_back(static_cast<float>(game.step(a).reward));
  }
  r.bootstrap = 0.1f;
  return r;
}

void BM_A3cUpdate(benchmark::State& state) {
  const A3cConfig c = a3c_config(state.range(0) == 0 ? "tiny" : "full");
  const int previous = engine::set_op_threads(static_cast<int>(state.range(1)));
  A3cNet shared(c, engine::Device::cpu(), 1), local(c, engine::Device::cpu(), 1);
  engine::optim::RmsPropOptions o;
  o.lr.base_lr = c.lr;
  o.alpha = c.rms_alpha;
  o.eps = c.rms_eps;
  o.eps_inside_sqrt = true;
  engine::optim::RmsProp opt(shared.parameters(), o);
  const auto params = local.parameters();
  const Rollout r = random_rollout(c, 7);
  for (auto _ : state) {
    const engine::Tensor loss = a3c_loss(local, r, c);
    loss.backward();
    engine::optim::clip_grad_norm(params, c.max_grad_norm);
    std::vector<engine::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    opt.step(grads);
    for (auto p : params) p.zero_grad();
    benchmark::DoNotOptimize(loss.item());
  }
  state.counters["updates/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::to_string(c.t_max) + "-step rollout, " + std::to_string(a3c_parameter_count(c)) + " parameters");
  engine::set_op_threads(previous);
}

BENCHMARK(BM_A3cUpdate)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"full", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
