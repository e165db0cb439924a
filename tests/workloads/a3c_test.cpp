// a3c: the parameter count (677,429 with 4 actions) and names, the loss against a host
// computation, one iteration's bookkeeping (updates, samples, metrics, per-thread phases), and
// the tiny preset learning to score clearly more than a random policy on the same games.
#include "workloads/a3c/a3c.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "engine/context.h"
#include "engine/ops.h"
#include "profiler/tracer.h"
#include "workloads/training_loop.h"

using namespace ts;
using namespace ts::workloads;
using engine::Tensor;

TEST(A3c, ParameterCountFollowsFromTheConfiguration) {
  const A3cConfig full = a3c_config("full");
  // conv1 16 (4 x 8 x 8 + 1) + conv2 32 (16 x 4 x 4 + 1) + fc 256 (32 x 9 x 9 + 1) + policy 4 (256 + 1) + value 257.
  EXPECT_EQ(a3c_parameter_count(full), 4'112 + 8'224 + 663'808 + 1'028 + 257);
  EXPECT_EQ(a3c_parameter_count(full), 677'429);
  for (const char* preset : {"tiny", "small", "full"}) {
    SCOPED_TRACE(preset);
    const A3cConfig c = a3c_config(preset);
    A3cNet net(c, engine::Device::meta(), 1);
    EXPECT_EQ(net.parameter_count(), a3c_parameter_count(c));
  }
  EXPECT_EQ(a3c_config("small").learners, 2);
  EXPECT_EQ(a3c_config("full").learners, 8);
  EXPECT_THROW(a3c_config("huge"), std::invalid_argument);
}

TEST(A3c, ModulesAreNamedAfterTheLayers) {
  A3cNet net(a3c_config("full"), engine::Device::meta(), 1);
  std::set<std::string> names;
  for (const auto& [name, t] : net.named_parameters()) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc.weight",
                                          "fc.bias", "policy.weight", "policy.bias", "value.weight", "value.bias"}));
}

// The loss the learner minimises, recomputed on the host from the network's outputs.
TEST(A3c, LossIsThePolicyGradientEntropyAndValueTerms) {
  A3cConfig c = a3c_config("tiny");
  A3cNet net(c, engine::Device::cpu(), 5);
  Breakout game(c.game, 6);
  Rollout r;
  std::vector<float> obs(4 * Breakout::kFramePixels);
  const int actions[] = {1, 2, 3, 0};
  for (int t = 0; t < 4; ++t) {
    game.observation(obs.data());
    r.states.insert(r.states.end(), obs.begin(), obs.end());
    r.actions.push_back(actions[t]);
    game.step(actions[t]);
    r.rewards.push_back(t == 2 ? 1.0f : 0.0f);
  }
  r.bootstrap = 0.5f;
  double entropy = 0;
  const Tensor loss = a3c_loss(net, r, c, &entropy);

  engine::NoGradScope no_grad;
  const auto out = net.forward(Tensor::from_vector({4, 4, 84, 84}, r.states));
  const auto logits = out.logits.to_vector();
  const auto values = out.value.to_vector();
  double want = 0, h_sum = 0, ret = r.bootstrap;
  std::vector<double> returns(4);
  for (int t = 3; t >= 0; --t)
    returns[static_cast<size_t>(t)] = ret = r.rewards[static_cast<size_t>(t)] + c.gamma * ret;
  for (int t = 0; t < 4; ++t) {
    double z = 0;
    for (int k = 0; k < 4; ++k) z += std::exp(static_cast<double>(logits[static_cast<size_t>(t * 4 + k)]));
    double h = 0;
    for (int k = 0; k < 4; ++k) {
      const double logp = logits[static_cast<size_t>(t * 4 + k)] - std::log(z);
      h -= std::exp(logp) * logp;
    }
    const double adv = returns[static_cast<size_t>(t)] - values[static_cast<size_t>(t)];
    const double logp_a = logits[static_cast<size_t>(t * 4 + actions[t])] - std::log(z);
    want += -logp_a * adv - c.entropy_beta * h + c.value_coef * adv * adv;
    h_sum += h;
  }
  EXPECT_NEAR(loss.item(), want, 1e-4 * (1 + std::abs(want)));
  EXPECT_NEAR(entropy, h_sum / 4, 1e-5);
  EXPECT_GT(entropy, 0.5);  // a fresh network's policy is far from deterministic

  // Backward reaches every parameter.
  {
    engine::EnableGradScope grad(true);
    a3c_loss(net, r, c).backward();
  }
  for (const auto& [name, p] : net.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  Rollout bad = r;
  bad.actions[0] = 4;
  EXPECT_THROW(a3c_loss(net, bad, c), std::invalid_argument);
  bad.rewards.pop_back();
  EXPECT_THROW(a3c_loss(net, bad, c), std::invalid_argument);
}

TEST(A3c, AnIterationIsAFixedNumberOfUpdatesSharedByTheLearners) {
  const WorkloadSpec* spec = find_workload("a3c");
  ASSERT_NE(spec, nullptr);
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = 2;
  auto w = spec->create(wc);
  const A3cConfig c = a3c_config("tiny");
  EXPECT_EQ(w->batch_size(), c.t_max);
  std::vector<std::vector<float>> before;
  for (const Tensor& p : w->model().parameters()) before.push_back(p.to_vector());

  auto& tracer = profiler::Tracer::global();
  tracer.clear();
  tracer.set_enabled(true);
  LoopOptions o;
  o.iterations = 3;
  o.warmup = 0;
  const LoopResult r = run_training(*w, o);
  tracer.set_enabled(false);
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 3u);
  std::vector<double> learner_updates(static_cast<size_t>(c.learners), 0.0);
  for (const auto& it : r.iterations) {
    std::map<std::string, double> m;
    for (const auto& x : it.metrics) m[x.name] = x.value;
    double updates = 0;
    for (int64_t l = 0; l < c.learners; ++l) {
      const std::string p = "learner." + std::to_string(l) + ".";
      ASSERT_TRUE(m.contains(p + "acting_ms") && m.contains(p + "learning_ms") && m.contains(p + "waiting_ms")) << p;
      updates += m[p + "updates"];
      learner_updates[static_cast<size_t>(l)] += m[p + "updates"];
    }
    EXPECT_EQ(updates, static_cast<double>(c.updates_per_iteration));
    // Samples are environment steps: at most t_max per update, at least one.
    EXPECT_LE(it.samples, c.updates_per_iteration * c.t_max);
    EXPECT_GE(it.samples, c.updates_per_iteration);
    EXPECT_GT(m["env_steps_per_s"], 0);
    EXPECT_GT(m["updates_per_s"], 0);
    EXPECT_NEAR(m["acting_fraction"] + m["learning_fraction"] + m["waiting_fraction"], 1.0, 1e-9);
    EXPECT_TRUE(std::isfinite(it.loss));
  }
  std::map<std::string, double> run;
  for (const auto& x : r.metrics) run[x.name] = x.value;
  EXPECT_EQ(run["updates_total"], 3.0 * static_cast<double>(c.updates_per_iteration));
  EXPECT_TRUE(run.contains("learner.1.waiting_fraction"));

  // The learners updated the shared parameters.
  double moved = 0;
  const auto params = w->model().parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto a = params[i].to_vector();
    const auto& b = before[i];
    for (size_t k = 0; k < a.size(); ++k) moved += std::abs(a[k] - b[k]);
  }
  EXPECT_GT(moved, 0);

  // Each learner's phases are ranges on its own thread: every learner waits at the end of every
  // iteration, and each one that took updates (whoever is free takes the next: normally all)
  // acted, ran forward, backward and the optimizer on its own thread.
  const auto events = tracer.drain();
  std::map<std::string, std::set<uint32_t>> threads_of;
  for (const auto& e : events) {
    if (e.kind == profiler::EventKind::phase) threads_of[std::string(tracer.str(e.name))].insert(e.thread);
  }
  const auto working = static_cast<size_t>(
      std::count_if(learner_updates.begin(), learner_updates.end(), [](double u) { return u > 0; }));
  EXPECT_GE(working, 1u);
  EXPECT_EQ(threads_of["waiting"].size(), static_cast<size_t>(c.learners));
  for (const char* phase : {"acting", "forward", "backward", "optimizer"}) {
    EXPECT_EQ(threads_of[phase].size(), working) << phase;
  }
}

TEST(A3c, TinyLearnsToScoreMoreThanARandomPolicy) {
  const WorkloadSpec* spec = find_workload("a3c");
  ASSERT_NE(spec, nullptr);
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = 1;
  auto w = spec->create(wc);
  const A3cConfig c = a3c_config("tiny");
  constexpr int64_t kEpisodes = 20;
  // The random policy plays the games evaluate() plays.
  const double random_score = mean_episode_score(c.game, nullptr, kEpisodes, kA3cEvalSeed);
  const double before = w->evaluate(kEpisodes).value;
  const auto t0 = std::chrono::steady_clock::now();
  LoopOptions o;
  // 16,000 updates, about 74,000 environment steps (about 25 s of training on one core at a
  // load of 4). Calibration: see docs/workloads.md "## a3c" (learning is asynchronous, so runs
  // differ even from one seed).
  // Asynchronous learners make the take-off point vary from run to run (45,000-55,000 steps
  // seen, and later under load), so a run still below the bar gets 1,000 more iterations, once:
  // the budget stays bounded (about 110,000 steps) and the bar stays where it is.
  o.iterations = 2000;
  o.warmup = 0;
  LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  double after = w->evaluate(kEpisodes).value;
  if (after <= 2.0 * random_score) {
    o.iterations = 1000;
    LoopResult more = run_training(*w, o);
    ASSERT_FALSE(more.failed) << more.error;
    r.iterations.insert(r.iterations.end(), more.iterations.begin(), more.iterations.end());
    after = w->evaluate(kEpisodes).value;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double sampled =
      mean_episode_score(c.game, dynamic_cast<const A3cNet*>(&w->model()), kEpisodes, kA3cEvalSeed, EvalActing::sample);
  int64_t steps = 0;
  for (const auto& it : r.iterations) steps += it.samples;
  std::printf("a3c tiny: mean score %.2f -> %.2f (sampling the policy: %.2f) after %lld environment steps in %.1f s; "
              "random policy %.2f\n",
              before, after, sampled, static_cast<long long>(steps), secs, random_score);
  EXPECT_GT(after, 2.0 * random_score);
}
