#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "engine/autotune.h"
#include "engine/context.h"
#include "memprof/ledger.h"
#include "profiler/analysis.h"
#include "profiler/tracer.h"
#include "workloads/gpu_metric_names.h"
#include "workloads/image_classifier.h"
#include "workloads/training_loop.h"
#include "workloads/workload.h"

using namespace ts;
using namespace ts::workloads;

namespace {
std::unique_ptr<Workload> tiny(uint64_t seed = 1, std::optional<int64_t> batch = std::nullopt) {
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = seed;
  wc.batch = batch;
  return find_workload("resnet50")->create(wc);
}
}  // namespace

TEST(Registry, ResolvesTheBatchInOnePlace) {
  for (const auto& spec : registry()) {
    for (const auto& p : spec.presets) {
      EXPECT_EQ(spec.batch_of(p.name, std::nullopt), p.default_batch) << spec.name << " " << p.name;
      EXPECT_EQ(spec.batch_of(p.name, 3), 3) << spec.name << " " << p.name;
    }
    EXPECT_THROW(spec.batch_of("medium", std::nullopt), std::invalid_argument) << spec.name;
    EXPECT_THROW(spec.batch_of("tiny", 0), std::invalid_argument) << spec.name;
  }
  // The workload is built with the batch batch_of gives, whether or not one was asked for.
  EXPECT_EQ(tiny()->batch_size(), find_workload("resnet50")->preset("tiny")->default_batch);
  EXPECT_EQ(tiny(1, 5)->batch_size(), 5);
}

TEST(Registry, KnowsResNet50AndItsPresets) {
  const auto* spec = find_workload("resnet50");
  ASSERT_NE(spec, nullptr);
  EXPECT_NE(spec->preset("tiny"), nullptr);
  EXPECT_NE(spec->preset("small"), nullptr);
  EXPECT_NE(spec->preset("full"), nullptr);
  EXPECT_EQ(spec->preset("medium"), nullptr);
  EXPECT_EQ(find_workload("nope"), nullptr);
  // The presets table carries the architecture hyper-parameters.
  bool has_size = false;
  for (const auto& [k, v] : spec->preset("full")->table) has_size |= (k == "image_size" && v == "224");
  EXPECT_TRUE(has_size);
}

TEST(TrainingLoop, TinyResNetLossFallsOnSyntheticData) {
  auto w = tiny(7, 16);
  LoopOptions o;
  o.warmup = 0;
  o.iterations = 60;
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 60u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.iterations[static_cast<size_t>(i)].loss / 5;
  for (int i = 55; i < 60; ++i) last += r.iterations[static_cast<size_t>(i)].loss / 5;
  EXPECT_LT(last, 0.6 * first) << "first " << first << " last " << last;
  // And it generalises to held-out synthetic batches better than chance (10%).
  EXPECT_GT(w->evaluate(4).value, 0.3);
}

TEST(TrainingLoop, MarksPhasesWarmupAndIterations) {
  auto& tracer = profiler::Tracer::global();
  tracer.clear();
  tracer.set_enabled(true);
  auto w = tiny();
  LoopOptions o;
  o.warmup = 1;
  o.iterations = 2;
  const LoopResult r = run_training(*w, o);
  tracer.set_enabled(false);
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 3u);
  EXPECT_TRUE(r.iterations[0].warmup);
  EXPECT_FALSE(r.iterations[1].warmup);
  const auto events = tracer.drain();
  const auto phases = profiler::phase_times(events, tracer);
  ASSERT_EQ(phases.size(), 3u);
  for (const auto& p : phases) {
    EXPECT_GT(p.data_ns, 0);
    EXPECT_GT(p.forward_ns, 0);
    EXPECT_GT(p.backward_ns, 0);
    EXPECT_GT(p.optimizer_ns, 0);
  }
  // One op event per op, with its layer path and pass.
  std::set<std::string> layers;
  bool forward_conv = false, backward_conv = false;
  for (const auto& e : events) {
    if (e.kind != profiler::EventKind::op) continue;
    layers.insert(std::string(tracer.str(e.layer)));
    const std::string name(tracer.str(e.name));
    if (tracer.str(e.layer) == "layer3.2.conv2") {
      forward_conv |= name == "conv2d" && e.pass == profiler::Pass::forward;
      backward_conv |= e.pass == profiler::Pass::backward;
    }
  }
  EXPECT_TRUE(layers.contains("conv1"));
  EXPECT_TRUE(layers.contains("layer1.0.bn2"));
  EXPECT_TRUE(layers.contains("fc"));
  EXPECT_TRUE(forward_conv);
  EXPECT_TRUE(backward_conv);
}

TEST(TrainingLoop, MemoryIsTaggedByCategory) {
  auto& ledger = memprof::Ledger::global();
  ledger.clear();
  auto w = tiny();
  LoopOptions o;
  o.warmup = 0;
  o.iterations = 2;
  ASSERT_FALSE(run_training(*w, o).failed);
  const auto peak = ledger.peak();
  auto at = [&](vocabulary::Category c) { return peak.bytes[static_cast<size_t>(c)]; };
  EXPECT_EQ(at(vocabulary::Category::weights), 4 * w->model().parameter_count());
  EXPECT_GT(at(vocabulary::Category::activations), 0);
  EXPECT_GT(at(vocabulary::Category::inputs), 0);
  EXPECT_GT(at(vocabulary::Category::optimizer_state), 0);
  // Per-layer activation bytes name the layers.
  bool conv1 = false;
  for (const auto& o2 : ledger.per_owner(vocabulary::Category::activations))
    conv1 |= o2.owner == "conv1" && o2.bytes_allocated_per_iteration > 0;
  EXPECT_TRUE(conv1);
}

TEST(TrainingLoop, StopsWhenAsked) {
  auto w = tiny();
  std::atomic<bool> stop{false};
  LoopOptions o;
  o.warmup = 0;
  o.iterations = 100;
  o.stop = &stop;
  o.on_iteration = [&](const IterationResult& it) {
    if (it.index == 1) stop = true;
  };
  const LoopResult r = run_training(*w, o);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.iterations.size(), 2u);
}

TEST(TrainingLoop, SameSeedSameLosses) {
  LoopOptions o;
  o.warmup = 0;
  o.iterations = 3;
  auto a = tiny(11), b = tiny(11);
  const auto ra = run_training(*a, o), rb = run_training(*b, o);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_FLOAT_EQ(static_cast<float>(ra.iterations[i].loss), static_cast<float>(rb.iterations[i].loss));
}

// On the CPU, ops run as they are called: no device time, no GPU figures.
TEST(TrainingLoop, CpuIterationsHaveNoDeviceTime) {
  auto w = tiny();
  LoopOptions o;
  o.warmup = 1;
  o.iterations = 2;
  o.device = engine::Device::cpu();
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 3u);
  for (const auto& it : r.iterations) {
    EXPECT_EQ(it.device_ns, -1);
    EXPECT_GT(it.end_ns, it.start_ns);
    for (const auto& m : it.metrics) EXPECT_NE(m.name.rfind("gpu_event", 0), 0u) << m.name;
  }
  for (const auto& m : r.metrics) EXPECT_NE(m.name.rfind("gpu_", 0), 0u) << m.name;
}

// Autotuning is on through the warm-up, off from the first timed iteration, and back after.
TEST(TrainingLoop, AutotuneOffForTimedIterations) {
  ASSERT_TRUE(engine::autotune());
  auto w = tiny();
  LoopOptions o;
  o.warmup = 1;
  o.iterations = 1;
  std::vector<bool> seen;
  o.on_iteration = [&](const IterationResult&) { seen.push_back(engine::autotune()); };
  ASSERT_FALSE(run_training(*w, o).failed);
  EXPECT_EQ(seen, (std::vector<bool>{true, false}));
  EXPECT_TRUE(engine::autotune());
  // A caller's own setting is what comes back.
  {
    engine::AutotuneScope off(false);
    seen.clear();
    ASSERT_FALSE(run_training(*w, o).failed);
    EXPECT_EQ(seen, (std::vector<bool>{false, false}));
    EXPECT_FALSE(engine::autotune());
  }
  EXPECT_TRUE(engine::autotune());
}

// Every gradient's readiness, as a projection onto several ranks needs it: each parameter listed
// with its size, and one "gradient ready" marker per parameter per backward of its own group, inside
// that backward (wgan: the generator's step runs backward through the critic, whose gradients
// are not its group's and get no marker there).
TEST(TrainingLoop, RecordsEveryGradientsReadinessInItsOwnGroupsBackward) {
  auto& tracer = profiler::Tracer::global();
  for (const char* name : {"resnet50", "wgan"}) {
    tracer.clear();
    tracer.set_enabled(true);
    WorkloadConfig wc;
    wc.preset = "tiny";
    auto w = find_workload(name)->create(wc);
    const auto groups = w->gradient_groups();
    LoopOptions o;
    o.warmup = 0;
    o.iterations = 1;
    const LoopResult r = run_training(*w, o);
    tracer.set_enabled(false);
    ASSERT_FALSE(r.failed) << r.error;
    size_t params = 0;
    for (const auto& g : groups) params += g.size();
    ASSERT_EQ(r.gradients.size(), params) << name;
    for (const auto& g : r.gradients) {
      const auto& p = groups[static_cast<size_t>(g.group)][static_cast<size_t>(g.slot)];
      EXPECT_EQ(g.name, p.name());
      EXPECT_EQ(g.bytes, p.numel() * 4);
    }
    EXPECT_EQ(r.gradient_clip_norms.size(), w->optimizer_recipes().size()) << name;
    const auto events = tracer.drain();
    std::vector<std::pair<int64_t, int64_t>> backwards;
    for (const auto& e : events) {
      if (e.kind == profiler::EventKind::phase && tracer.str(e.name) == "backward")
        backwards.emplace_back(e.start_ns, e.end_ns);
    }
    std::map<std::string, int> markers;
    for (const auto& e : events) {
      if (e.kind != profiler::EventKind::marker || tracer.str(e.name) != "gradient ready") continue;
      ++markers[std::string(tracer.str(e.layer))];
      const bool inside = std::any_of(backwards.begin(), backwards.end(),
                                      [&](const auto& b) { return e.start_ns >= b.first && e.start_ns <= b.second; });
      EXPECT_TRUE(inside) << name << " " << tracer.str(e.layer);
    }
    // resnet50: one backward; wgan: 5 critic steps (group 0) and one generator step (group 1).
    for (const auto& g : r.gradients) {
      const int expected = std::string(name) == "wgan" && g.group == 0 ? 5 : 1;
      EXPECT_EQ(markers[g.name], expected) << name << " " << g.name;
    }
  }
}
