// Optimizer recipes (engine/optim/optimizer_recipe.h), what a parameter server updates its keys
// with: a parameter cut into chunks, each stepped by its own ShardOptimizer, ends bit-identical
// to the engine optimizer stepping the whole parameter (sgd with and without nesterov, adam,
// rmsprop in both epsilon forms); lr_scale scales the step's learning rate; the schedule and
// step count advance per call; an undefined gradient leaves its tensor alone. Then every
// workload's recipes: one per gradient group, and for those whose optimizer phase runs the
// update alone (no clipping, no threads) the recipe's update of each parameter, cut in two,
// equals the workload's own over real training steps.
#include "engine/optim/optimizer_recipe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "test_util.h"

#ifndef TS_NO_WORKLOADS
#include "workloads/a3c/a3c.h"
#include "workloads/deepspeech2/deepspeech2.h"
#include "workloads/seq2seq/seq2seq.h"
#include "workloads/workload.h"
#endif

using namespace ts::engine;
using namespace ts::engine::testing;

namespace {

constexpr int64_t kN = 37;
const std::vector<int64_t> kCuts = {0, 10, kN};  // the chunks [0, 10) and [10, 37)

std::vector<float> slice(const std::vector<float>& v, int64_t begin, int64_t end) {
  return {v.begin() + begin, v.begin() + end};
}

// "" when a and b hold the same bits, else where they first differ.
std::string first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && !(std::isnan(a[i]) && std::isnan(b[i]))) {
      std::ostringstream o;  // enough digits to tell neighbouring floats apart
      o << std::setprecision(9) << "element " << i << ": " << a[i] << " vs " << b[i];
      return o.str();
    }
  }
  return "";
}

std::vector<std::vector<float>> gradients(int steps) {
  std::vector<std::vector<float>> g;
  for (int s = 0; s < steps; ++s) g.push_back(uniform(kN, 100 + static_cast<uint64_t>(s), -2.0f, 2.0f));
  return g;
}

// The engine optimizer's own step() over one parameter of kN elements, the gradient of each step
// put there by a backward (loss = sum(c * p): the gradient is c exactly).
template <class Optimizer, class Options>
std::vector<float> whole(const Options& o, const std::vector<float>& init, const std::vector<std::vector<float>>& grads,
                         double* lr_after = nullptr) {
  Tensor p = Tensor::from_vector({kN}, init).set_requires_grad(true);
  Optimizer opt({p}, o);
  for (const auto& g : grads) {
    ops::sum(ops::mul(p, Tensor::from_vector({kN}, g))).backward();
    opt.step();
    opt.zero_grad();
  }
  if (lr_after) *lr_after = opt.current_lr();
  return p.to_vector();
}

// The same parameter cut at kCuts, each chunk its own 1-D tensor with its own ShardOptimizer from
// the recipe, stepped with the matching slice of each gradient.
std::vector<float> chunked(const optim::OptimizerRecipe& r, const std::vector<float>& init,
                           const std::vector<std::vector<float>>& grads, double* lr_after = nullptr) {
  std::vector<Tensor> chunks;
  std::vector<std::unique_ptr<optim::ShardOptimizer>> opts;
  for (size_t k = 0; k + 1 < kCuts.size(); ++k) {
    chunks.push_back(Tensor::from_vector({kCuts[k + 1] - kCuts[k]}, slice(init, kCuts[k], kCuts[k + 1])));
    opts.push_back(r.build({chunks.back()}));
  }
  for (const auto& g : grads) {
    for (size_t k = 0; k < chunks.size(); ++k) {
      opts[k]->step({Tensor::from_vector({kCuts[k + 1] - kCuts[k]}, slice(g, kCuts[k], kCuts[k + 1]))});
    }
  }
  for (const auto& o : opts) EXPECT_EQ(o->steps(), static_cast<int64_t>(grads.size()));
  if (lr_after) *lr_after = opts.front()->current_lr();
  std::vector<float> out;
  for (const Tensor& c : chunks) {
    const auto v = c.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// A schedule whose rate differs at each of the first steps, so that a step count off by one shows.
optim::LrSchedule warming(double base) {
  optim::LrSchedule lr;
  lr.base_lr = base;
  lr.warmup_steps = 4;
  return lr;
}

// The recipe's chunks against the whole parameter, stepped 3 times from the values of `seed`:
// the same bits, and the same learning rate at the end.
template <class Optimizer, class Options>
void expect_chunks_match_whole(const optim::OptimizerRecipe& r, const Options& o, uint64_t seed) {
  const auto init = uniform(kN, seed);
  const auto grads = gradients(3);
  double lr_whole = 0, lr_chunked = 0;
  const auto want = whole<Optimizer>(o, init, grads, &lr_whole);
  const auto got = chunked(r, init, grads, &lr_chunked);
  EXPECT_EQ(first_difference(got, want), "");
  EXPECT_NE(first_difference(got, init), "") << "nothing moved";
  EXPECT_EQ(lr_chunked, lr_whole);
}

}  // namespace

TEST(OptimizerRecipe, SgdChunksMatchTheWholeParameter) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "plain momentum");
    optim::SgdOptions o;
    o.lr = warming(0.1);
    o.momentum = 0.9;
    o.weight_decay = 1e-2;
    o.nesterov = nesterov;
    const auto r = optim::sgd_recipe(o, 3.5);
    EXPECT_EQ(r.name, "sgd");
    EXPECT_EQ(r.max_grad_norm, 3.5);
    expect_chunks_match_whole<optim::Sgd>(r, o, 7);
  }
}

TEST(OptimizerRecipe, AdamChunksMatchTheWholeParameter) {
  optim::AdamOptions o;
  o.lr = warming(0.01);
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  o.eps = 1e-6;
  o.weight_decay = 1e-2;
  const auto r = optim::adam_recipe(o);
  EXPECT_EQ(r.name, "adam");
  EXPECT_EQ(r.max_grad_norm, 0);
  expect_chunks_match_whole<optim::Adam>(r, o, 8);
}

TEST(OptimizerRecipe, RmsPropChunksMatchTheWholeParameter) {
  for (bool inside : {false, true}) {
    SCOPED_TRACE(inside ? "eps inside the root" : "eps outside");
    optim::RmsPropOptions o;
    o.lr = warming(0.01);
    o.alpha = 0.9;
    o.eps = inside ? 0.1 : 1e-8;
    o.eps_inside_sqrt = inside;
    const auto r = optim::rmsprop_recipe(o, 40);
    EXPECT_EQ(r.name, "rmsprop");
    EXPECT_EQ(r.max_grad_norm, 40);
    expect_chunks_match_whole<optim::RmsProp>(r, o, 9);
  }
}

// step(grads) at lr_scale 1 is step(): the optimizers' two entry points share one update.
TEST(OptimizerRecipe, GradientsHandedInMatchTheOwnStep) {
  const auto init = uniform(kN, 10);
  const auto grads = gradients(3);
  optim::SgdOptions so;
  so.lr = warming(0.1);
  so.nesterov = true;
  optim::AdamOptions ao;
  ao.lr = warming(0.01);
  ao.weight_decay = 1e-3;
  auto handed = [&](auto& opt, Tensor& p) {
    for (const auto& g : grads) opt.step({Tensor::from_vector({kN}, g)});
    return p.to_vector();
  };
  Tensor ps = Tensor::from_vector({kN}, init);
  optim::Sgd sgd({ps}, so);
  EXPECT_EQ(first_difference(handed(sgd, ps), whole<optim::Sgd>(so, init, grads)), "");
  EXPECT_EQ(sgd.steps(), 3);
  Tensor pa = Tensor::from_vector({kN}, init);
  optim::Adam adam({pa}, ao);
  EXPECT_EQ(first_difference(handed(adam, pa), whole<optim::Adam>(ao, init, grads)), "");
  EXPECT_EQ(adam.steps(), 3);
  EXPECT_THROW(sgd.step(std::vector<Tensor>{}), std::invalid_argument);
  EXPECT_THROW(adam.step(std::vector<Tensor>{Tensor(), Tensor()}), std::invalid_argument);
}

// Plain SGD moves a parameter by lr g: at lr_scale 0.5, by exactly half (the values are dyadic,
// so every product and difference is exact).
TEST(OptimizerRecipe, LrScaleScalesTheStep) {
  optim::SgdOptions o;
  o.lr.base_lr = 0.25;
  o.momentum = 0;
  o.weight_decay = 0;
  const std::vector<float> init = {1, 2, -3, 0.5f}, g = {1, -2, 0.5f, 4};
  const auto r = optim::sgd_recipe(o);
  Tensor full = Tensor::from_vector({4}, init), half = Tensor::from_vector({4}, init);
  auto full_opt = r.build({full});
  auto half_opt = r.build({half});
  full_opt->step({Tensor::from_vector({4}, g)});
  half_opt->step({Tensor::from_vector({4}, g)}, 0.5);
  const auto f = full.to_vector(), h = half.to_vector();
  for (size_t i = 0; i < init.size(); ++i) {
    EXPECT_EQ(init[i] - f[i], 0.25f * g[i]) << i;
    EXPECT_EQ(init[i] - h[i], 0.125f * g[i]) << i;
  }
  EXPECT_EQ(half_opt->steps(), 1);

  // Adam and RMSProp: the first step's size is proportional to the rate.
  optim::AdamOptions ao;
  ao.lr.base_lr = 0.01;
  optim::RmsPropOptions ro;
  ro.lr.base_lr = 0.01;
  for (const auto& recipe : {optim::adam_recipe(ao), optim::rmsprop_recipe(ro)}) {
    SCOPED_TRACE(recipe.name);
    Tensor a = Tensor::from_vector({4}, init), b = Tensor::from_vector({4}, init);
    recipe.build({a})->step({Tensor::from_vector({4}, g)});
    recipe.build({b})->step({Tensor::from_vector({4}, g)}, 0.5);
    const auto va = a.to_vector(), vb = b.to_vector();
    for (size_t i = 0; i < init.size(); ++i) {
      EXPECT_NEAR(init[i] - vb[i], 0.5 * (init[i] - va[i]), 2e-6) << i;
      EXPECT_GT(std::abs(init[i] - va[i]), 1e-4) << i;
    }
  }
}

// current_lr() follows the schedule (here a linear warm-up over 4 steps) as steps() advances, one
// per call whatever the scale.
TEST(OptimizerRecipe, ScheduleAndStepCountAdvancePerCall) {
  optim::AdamOptions o;
  o.lr = warming(0.4);
  Tensor t = Tensor::from_vector({3}, {1, 2, 3});
  auto opt = optim::adam_recipe(o).build({t});
  EXPECT_EQ(opt->steps(), 0);
  EXPECT_DOUBLE_EQ(opt->current_lr(), 0.1);
  const std::vector<double> want = {0.2, 0.3, 0.4, 0.4};
  for (size_t s = 0; s < want.size(); ++s) {
    opt->step({Tensor::from_vector({3}, {1, 1, 1})}, s == 1 ? 0.5 : 1.0);
    EXPECT_EQ(opt->steps(), static_cast<int64_t>(s + 1));
    EXPECT_DOUBLE_EQ(opt->current_lr(), want[s]) << s;
  }
  // The recipe holds its own copy of the options: an engine Adam from them agrees.
  Tensor u = Tensor::from_vector({3}, {1, 2, 3});
  optim::Adam adam({u}, o);
  EXPECT_EQ(adam.current_lr(), optim::adam_recipe(o).build({t})->current_lr());
}

TEST(OptimizerRecipe, AnUndefinedGradientLeavesItsTensorAlone) {
  optim::SgdOptions so;
  optim::AdamOptions ao;
  optim::RmsPropOptions ro;
  for (const auto& r : {optim::sgd_recipe(so), optim::adam_recipe(ao), optim::rmsprop_recipe(ro)}) {
    SCOPED_TRACE(r.name);
    const std::vector<float> va = {1, 2, 3}, vb = {4, 5};
    Tensor a = Tensor::from_vector({3}, va), b = Tensor::from_vector({2}, vb);
    auto opt = r.build({a, b});
    opt->step({Tensor(), Tensor::from_vector({2}, {1, -1})});
    EXPECT_EQ(a.to_vector(), va);
    EXPECT_NE(b.to_vector(), vb);
    opt->step({Tensor(), Tensor()});
    EXPECT_EQ(a.to_vector(), va);
    EXPECT_EQ(opt->steps(), 2);
    EXPECT_THROW(opt->step({Tensor()}), std::invalid_argument);  // one gradient for two tensors
  }
}

// ---------------------------------------------------------------- the workloads' recipes

#ifndef TS_NO_WORKLOADS

namespace {

using namespace ts::workloads;

std::unique_ptr<Workload> build_workload(const std::string& name) {
  const WorkloadSpec* spec = find_workload(name);
  if (!spec) throw std::runtime_error("no workload " + name);
  WorkloadConfig wc;  // the tiny preset, seed 1, CPU
  spec->check(wc);
  return spec->create(wc);
}

}  // namespace

TEST(OptimizerRecipe, EveryWorkloadHasOneRecipePerGradientGroup) {
  const std::set<std::string> kinds = {"sgd", "adam", "rmsprop"};
  // What each workload's own step runs (a workload added later need only name a known kind).
  const std::map<std::string, std::string> expected = {
      {"resnet50", "sgd"},     {"inception_v3", "sgd"}, {"faster_rcnn", "sgd"}, {"deepspeech2", "sgd"},
      {"transformer", "adam"}, {"seq2seq", "adam"},     {"wgan", "adam"},       {"a3c", "rmsprop"}};
  std::set<std::string> seen;
  for (const auto& spec : registry()) {
    SCOPED_TRACE(spec.name);
    auto w = build_workload(spec.name);
    const auto groups = w->gradient_groups();
    const auto recipes = w->optimizer_recipes();
    ASSERT_FALSE(recipes.empty());
    ASSERT_EQ(recipes.size(), groups.size());
    for (size_t g = 0; g < recipes.size(); ++g) {
      EXPECT_TRUE(kinds.count(recipes[g].name)) << recipes[g].name;
      if (expected.count(spec.name)) {
        EXPECT_EQ(recipes[g].name, expected.at(spec.name));
      }
      ASSERT_TRUE(recipes[g].build);
      // Built over stand-ins of the group's parameters, the optimizer starts where the workload's
      // does (wgan's learning_rate() is the generator's, group 1).
      std::vector<Tensor> standins;
      for (const Tensor& p : groups[g]) standins.push_back(Tensor::zeros(p.shape(), Device::cpu()));
      const auto opt = recipes[g].build(standins);
      EXPECT_EQ(opt->steps(), 0);
      if (g + 1 == recipes.size()) {
        EXPECT_EQ(opt->current_lr(), w->learning_rate());
      }
    }
    // The clipping each step applies, and none where it applies none.
    double clip = 0;
    if (spec.name == "seq2seq") clip = seq2seq_config("tiny").max_gradient_norm;
    if (spec.name == "deepspeech2") clip = std::max(0.0, deepspeech2_config("tiny").max_grad_norm);
    if (spec.name == "a3c") clip = a3c_config("tiny").max_grad_norm;
    for (const auto& r : recipes) EXPECT_EQ(r.max_grad_norm, clip);
    if (spec.name == "wgan") {
      EXPECT_EQ(recipes.size(), 2u);  // the critic, then the generator
    }
    seen.insert(spec.name);
  }
  for (const auto& [name, kind] : expected) EXPECT_TRUE(seen.count(name)) << name << " is not registered";
}

namespace {

// Runs a workload's step through its phases and, around each optimizer phase, updates copies of
// the phase's gradient group (the last backward's) by the group's recipe: each parameter cut in
// two chunks with a ShardOptimizer each, handed the slices of the gradient the phase is about to
// apply. After the phase, the workload's parameters must equal the copies bit for bit.
class RecipePhases final : public Phases {
 public:
  explicit RecipePhases(Workload& w) : groups_(w.gradient_groups()), recipes_(w.optimizer_recipes()) {
    shards_.resize(groups_.size());
  }
  void data(const std::function<void()>& f) override { f(); }
  void forward(const std::function<void()>& f) override { f(); }
  void backward(const std::function<void()>& f, int group) override {
    f();
    group_ = static_cast<size_t>(group);
  }
  void optimizer(const std::function<void()>& f) override {
    auto& shards = shards_.at(group_);
    const auto& params = groups_.at(group_);
    if (shards.empty()) {  // the copies start from the parameters before the first update
      for (const Tensor& p : params) shards.push_back(ParamShards(p.to_vector(), recipes_.at(group_)));
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor g = params[i].grad();
      shards[i].step(g.defined() ? g.to_vector() : std::vector<float>{});
    }
    f();
    updates_ += 1;
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(first_difference(params[i].to_vector(), shards[i].values()), "")
          << "update " << updates_ << ", group " << group_ << ", parameter " << params[i].name();
    }
  }
  int updates() const { return updates_; }

 private:
  struct ParamShards {
    ParamShards(const std::vector<float>& init, const optim::OptimizerRecipe& r) {
      const auto n = static_cast<int64_t>(init.size());
      cuts = n > 1 ? std::vector<int64_t>{0, n / 3, n} : std::vector<int64_t>{0, n};
      for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        chunks.push_back(Tensor::from_vector({cuts[k + 1] - cuts[k]}, slice(init, cuts[k], cuts[k + 1])));
        opts.push_back(r.build({chunks.back()}));
      }
    }
    void step(const std::vector<float>& grad) {  // empty: no gradient
      for (size_t k = 0; k < chunks.size(); ++k) {
        opts[k]->step({grad.empty() ? Tensor()
                                    : Tensor::from_vector({cuts[k + 1] - cuts[k]}, slice(grad, cuts[k], cuts[k + 1]))});
      }
    }
    std::vector<float> values() const {
      std::vector<float> out;
      for (const Tensor& c : chunks) {
        const auto v = c.to_vector();
        out.insert(out.end(), v.begin(), v.end());
      }
      return out;
    }
    std::vector<int64_t> cuts;
    std::vector<Tensor> chunks;
    std::vector<std::shared_ptr<optim::ShardOptimizer>> opts;
  };

  std::vector<std::vector<Tensor>> groups_;
  std::vector<optim::OptimizerRecipe> recipes_;
  std::vector<std::vector<ParamShards>> shards_;
  size_t group_ = 0;
  int updates_ = 0;
};

}  // namespace

// The workloads whose optimizer phase is the optimizer's step alone: two iterations (momentum or
// moments in play, the warm-up's rate changing), every update compared.
TEST(OptimizerRecipe, WorkloadStepsEqualTheirRecipes) {
  for (const char* name : {"resnet50", "transformer", "wgan"}) {
    SCOPED_TRACE(name);
    auto w = build_workload(name);
    RecipePhases phases(*w);
    for (int i = 0; i < 2; ++i) w->step(phases);
    EXPECT_GE(phases.updates(), 2);
  }
}

#endif  // TS_NO_WORKLOADS
