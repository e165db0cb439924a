// Data parallelism's view of the workloads (workloads/data/shard.h): for every workload but a3c
// at the tiny preset, the ranks of one world draw different training batches, rank 0 of a world
// of one draws exactly what the default config draws, every rank builds the same model, and a
// rank's batches are deterministic. Then wgan's two gradient groups (and which parameters each
// backward reaches), a3c's workers seeded apart, rank/world checks in every
// spec, and the sharding of the finite data sets (Fashion-MNIST, parallel text, speech).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "workloads/data/image_data.h"
#include "workloads/data/shard.h"
#include "workloads/data/speech_data.h"
#include "workloads/data/text_data.h"
#include "workloads/training_loop.h"
#include "workloads/workload.h"

using namespace ts;
using namespace ts::workloads;
using engine::Tensor;

namespace {

WorkloadConfig tiny(int rank = 0, int world = 1, uint64_t seed = 1) {
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.seed = seed;
  wc.rank = rank;
  wc.world_size = world;
  return wc;
}

std::unique_ptr<Workload> build(const std::string& name, const WorkloadConfig& wc) {
  const WorkloadSpec* spec = find_workload(name);
  if (!spec) throw std::runtime_error("no workload " + name);
  spec->check(wc);
  return spec->create(wc);
}

// The first `n` training batches' values, inputs then labels (when a workload has them), with
// their shapes, so that batches of different shapes never compare equal.
std::vector<std::vector<float>> draw(Workload& w, int n) {
  std::vector<std::vector<float>> out;
  for (int i = 0; i < n; ++i) {
    const Batch b = w.next_batch();
    for (const Tensor* t : {&b.inputs, &b.labels}) {
      if (!t->defined()) continue;
      std::vector<float> v;
      for (int64_t d : t->shape()) v.push_back(static_cast<float>(d));
      const std::vector<float> x = t->to_vector();
      v.insert(v.end(), x.begin(), x.end());
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::vector<float> inputs_of_first_batch(Workload& w) { return w.next_batch().inputs.to_vector(); }

// Parameters and buffers (faster_rcnn's calibrated frozen batch-norm statistics are buffers).
std::vector<std::pair<std::string, std::vector<float>>> state(Workload& w) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& [name, t] : w.model().named_parameters()) out.emplace_back(name, t.to_vector());
  for (const auto& [name, t] : w.model().named_buffers()) out.emplace_back("buffer " + name, t.to_vector());
  return out;
}

class Sharded : public ::testing::TestWithParam<std::string> {};

// Every workload that data parallelism can run (a3c cannot: its learners are asynchronous).
const std::vector<std::string> kSharded = {"resnet50",    "inception_v3", "seq2seq", "transformer",
                                           "faster_rcnn", "deepspeech2",  "wgan"};

}  // namespace

TEST_P(Sharded, RanksOfOneWorldDrawDifferentBatches) {
  auto r0 = build(GetParam(), tiny(0, 2));
  auto r1 = build(GetParam(), tiny(1, 2));
  EXPECT_NE(inputs_of_first_batch(*r0), inputs_of_first_batch(*r1));
  EXPECT_NE(inputs_of_first_batch(*r0), inputs_of_first_batch(*r1));  // and the second
}

TEST_P(Sharded, RankZeroOfOneIsTheDefault) {
  WorkloadConfig plain;
  plain.preset = "tiny";
  auto a = build(GetParam(), plain);
  auto b = build(GetParam(), tiny(0, 1));
  EXPECT_EQ(draw(*a, 2), draw(*b, 2));
}

TEST_P(Sharded, EveryRankBuildsTheSameModel) {
  auto r0 = build(GetParam(), tiny(0, 2, 7));
  auto r1 = build(GetParam(), tiny(1, 2, 7));
  auto alone = build(GetParam(), tiny(0, 1, 7));
  const auto s0 = state(*r0);
  ASSERT_FALSE(s0.empty());
  EXPECT_TRUE(s0 == state(*r1));
  EXPECT_TRUE(s0 == state(*alone));
}

TEST_P(Sharded, ARanksBatchesAreDeterministic) {
  auto a = build(GetParam(), tiny(1, 2));
  auto b = build(GetParam(), tiny(1, 2));
  EXPECT_EQ(draw(*a, 2), draw(*b, 2));
}

INSTANTIATE_TEST_SUITE_P(Workloads, Sharded, ::testing::ValuesIn(kSharded),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(Shard, EverySpecChecksRankAndWorldSize) {
  for (const auto& spec : registry()) {
    SCOPED_TRACE(spec.name);
    for (auto [rank, world] : std::vector<std::pair<int, int>>{{2, 2}, {-1, 2}, {0, 0}, {1, 1}}) {
      EXPECT_THROW(spec.check(tiny(rank, world)), std::invalid_argument) << rank << " of " << world;
    }
    EXPECT_NO_THROW(spec.check(tiny(0, 1)));
  }
}

// ---------------------------------------------------------------- wgan's gradient groups

namespace {

// Runs the phases in order and, at the end of each backward, notes its group and which of the
// model's parameters then hold a non-zero gradient.
class RecordingPhases final : public Phases {
 public:
  struct Backward {
    int group = 0;
    std::set<const void*> with_gradient;
  };
  explicit RecordingPhases(Workload& w) : w_(w) {}
  void data(const std::function<void()>& f) override { f(); }
  void forward(const std::function<void()>& f) override { f(); }
  void backward(const std::function<void()>& f, int group) override {
    f();
    Backward b{group, {}};
    for (const Tensor& p : w_.model().parameters()) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      const std::vector<float> v = g.to_vector();
      if (std::any_of(v.begin(), v.end(), [](float x) { return x != 0.0f; })) b.with_gradient.insert(p.impl());
    }
    backwards.push_back(std::move(b));
  }
  void optimizer(const std::function<void()>& f) override { f(); }
  std::vector<Backward> backwards;

 private:
  Workload& w_;
};

std::set<const void*> identities(const std::vector<Tensor>& ts) {
  std::set<const void*> out;
  for (const Tensor& t : ts) out.insert(t.impl());
  return out;
}

}  // namespace

TEST(Shard, WganHasACriticAndAGeneratorGroup) {
  auto w = build("wgan", tiny());
  const auto groups = w->gradient_groups();
  ASSERT_EQ(groups.size(), 2u);
  const std::set<const void*> critic = identities(groups[0]), generator = identities(groups[1]);
  EXPECT_EQ(critic.size(), groups[0].size());
  EXPECT_EQ(generator.size(), groups[1].size());
  std::set<const void*> both = critic;
  both.insert(generator.begin(), generator.end());
  EXPECT_EQ(both.size(), critic.size() + generator.size()) << "the groups overlap";
  EXPECT_EQ(both, identities(w->model().parameters())) << "the groups are not all the parameters";
  // Group 0 is the critic's: its parameter names start with "critic.".
  std::set<const void*> named_critic;
  for (const auto& [name, t] : w->model().named_parameters()) {
    if (name.starts_with("critic.")) named_critic.insert(t.impl());
  }
  EXPECT_EQ(critic, named_critic);
}

TEST(Shard, EachWganBackwardReachesOnlyItsGroup) {
  auto w = build("wgan", tiny());
  const auto groups = w->gradient_groups();
  RecordingPhases phases(*w);
  w->step(phases);
  // Five critic steps (group 0), then the generator step (group 1).
  ASSERT_EQ(phases.backwards.size(), 6u);
  for (size_t i = 0; i < phases.backwards.size(); ++i) {
    const auto& b = phases.backwards[i];
    const int expected = i < 5 ? 0 : 1;
    EXPECT_EQ(b.group, expected) << "backward " << i;
    const std::set<const void*> group = identities(groups[static_cast<size_t>(expected)]);
    EXPECT_FALSE(b.with_gradient.empty()) << "backward " << i;
    for (const void* p : b.with_gradient) EXPECT_TRUE(group.count(p)) << "backward " << i << " reached another group";
  }
}

TEST(Shard, OtherWorkloadsHaveOneGroupOfEveryParameter) {
  auto w = build("resnet50", tiny());
  const auto groups = w->gradient_groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(identities(groups[0]), identities(w->model().parameters()));
}

// ---------------------------------------------------------------- a3c

// On a parameter server each worker's learners play their own games from the same network.
TEST(Shard, A3cWorkersShareTheNetworkAndPlayGamesOfTheirOwn) {
  const auto first_iteration_loss = [](int rank, std::vector<std::vector<float>>* params) {
    WorkloadConfig wc = tiny(rank, 2);
    wc.learners = 1;  // one learner: the iteration is deterministic
    auto w = build("a3c", wc);
    for (const Tensor& p : w->model().parameters()) params->push_back(p.to_vector());
    LoopOptions o;
    o.iterations = 1;
    o.warmup = 0;
    const LoopResult r = run_training(*w, o);
    if (r.failed || r.iterations.size() != 1) throw std::runtime_error("a3c did not train: " + r.error);
    return r.iterations[0].loss;
  };
  std::vector<std::vector<float>> p0, p0_again, p1;
  const double loss0 = first_iteration_loss(0, &p0);
  EXPECT_EQ(first_iteration_loss(0, &p0_again), loss0) << "the same rank should play the same games";
  EXPECT_NE(first_iteration_loss(1, &p1), loss0) << "rank 1 played rank 0's games";
  EXPECT_EQ(p0, p1) << "the network must not depend on the rank";
}

// ---------------------------------------------------------------- the helpers and the finite sets

TEST(Shard, IndicesAreRoundRobinAndAnEmptyShardIsAnError) {
  EXPECT_EQ(shard_indices(5, {0, 1}, "x"), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(shard_indices(5, {0, 2}, "x"), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(shard_indices(5, {1, 2}, "x"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(shard_indices(3, {2, 3}, "x"), (std::vector<int64_t>{2}));
  try {
    shard_indices(2, {2, 3}, "the test set");
    ADD_FAILURE() << "an empty shard was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the test set"), std::string::npos) << e.what();
  }
  EXPECT_THROW(shard_indices(5, {2, 2}, "x"), std::invalid_argument);
  EXPECT_THROW(check_shard({0, 0}), std::invalid_argument);
  EXPECT_THROW(check_shard({-1, 2}), std::invalid_argument);
  EXPECT_EQ(take_shard(std::vector<int>{10, 11, 12, 13}, {1, 2}, "x"), (std::vector<int>{11, 13}));
}

TEST(Shard, SeedsMixOnlyInAWorldOfSeveral) {
  EXPECT_EQ(shard_seed(42, {0, 1}), 42u);
  std::set<uint64_t> seeds{42};
  for (int r = 0; r < 8; ++r) seeds.insert(shard_seed(42, {r, 8}));
  EXPECT_EQ(seeds.size(), 9u);
  EXPECT_EQ(shard_seed(42, {3, 8}), shard_seed(42, {3, 4}));  // the rank's stream, whatever the world
  EXPECT_NE(shard_seed(42, {3, 8}), shard_seed(43, {3, 8}));
}

TEST(Shard, FashionMnistRanksTrainOnHalvesAndTestOnTheSameImages) {
  if (!std::filesystem::exists(FashionMnist::kDebianDirectory)) {
    GTEST_FAIL() << "dataset-fashion-mnist is not installed: run scripts/setup";
  }
  const auto cpu = engine::Device::cpu();
  FashionMnist a(FashionMnist::kDebianDirectory, 28, 1, cpu, {0, 2}),
      b(FashionMnist::kDebianDirectory, 28, 1, cpu, {1, 2});
  EXPECT_EQ(a.train_size(), 30000);
  EXPECT_EQ(b.train_size(), 30000);
  EXPECT_NE(a.next_train(8).inputs.to_vector(), b.next_train(8).inputs.to_vector());
  EXPECT_EQ(a.heldout(0, 8).inputs.to_vector(), b.heldout(0, 8).inputs.to_vector());
}

TEST(Shard, TextRanksSplitTheTrainingPairs) {
  SyntheticTextOptions o;
  o.src_vocab = 64;
  o.tgt_vocab = 40;
  o.max_length = 12;
  o.train_pairs = 101;
  o.dev_pairs = 10;
  o.test_pairs = 10;
  const auto whole = std::make_shared<const ParallelCorpus>(SyntheticTranslation(o).corpus());
  EXPECT_EQ(shard_corpus(whole, {0, 1}), whole);
  const auto r0 = shard_corpus(whole, {0, 2}), r1 = shard_corpus(whole, {1, 2});
  ASSERT_EQ(r0->train.size(), 51u);
  ASSERT_EQ(r1->train.size(), 50u);
  for (size_t i = 0; i < whole->train.size(); ++i) {
    EXPECT_EQ(whole->train[i], (i % 2 ? r1 : r0)->train[i / 2]) << i;
  }
  EXPECT_EQ(r0->dev, whole->dev);
  EXPECT_EQ(r1->test, whole->test);
  EXPECT_EQ(r1->src_vocab, whole->src_vocab);
  EXPECT_THROW(shard_corpus(whole, {101, 102}), std::invalid_argument);
}

TEST(Shard, SpeechRanksSplitTheTrainingUtterances) {
  try {
    find_espeak_ng();
  } catch (const std::exception& e) {
    FAIL() << e.what() << "\n(scripts/setup installs espeak-ng)";
  }
  const std::vector<Utterance> corpus = load_speech_corpus("synthetic");
  const auto cpu = engine::Device::cpu();
  SpeechDataOptions o;
  const SpeechDataset whole(corpus, o, cpu);
  o.shard = {0, 2};
  const SpeechDataset a(corpus, o, cpu);
  o.shard = {1, 2};
  const SpeechDataset b(corpus, o, cpu);
  EXPECT_EQ(a.train_size() + b.train_size(), whole.train_size());
  for (int64_t i = 0; i < whole.train_size(); ++i) {
    const auto& u = whole.train_utterances()[static_cast<size_t>(i)];
    EXPECT_EQ(u.audio, (i % 2 ? b : a).train_utterances()[static_cast<size_t>(i / 2)].audio) << i;
  }
  ASSERT_EQ(a.heldout_size(), whole.heldout_size());
  for (int64_t i = 0; i < whole.heldout_size(); ++i) {
    EXPECT_EQ(a.heldout_utterances()[static_cast<size_t>(i)].audio,
              whole.heldout_utterances()[static_cast<size_t>(i)].audio);
    EXPECT_EQ(b.heldout_utterances()[static_cast<size_t>(i)].audio,
              whole.heldout_utterances()[static_cast<size_t>(i)].audio);
  }
}
