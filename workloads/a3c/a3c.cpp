#include "workloads/a3c/a3c.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "engine/backend.h"
#include "engine/context.h"
#include "engine/cpu/host_allocator.h"
#include "engine/ops.h"
#include "engine/optim/clip.h"
#include "engine/optim/rmsprop.h"
#include "engine/random.h"
#include "profiler/tracer.h"
#include "vocabulary/clock.h"
#include "workloads/data/shard.h"

namespace ts::workloads {

using engine::Device;
using engine::Tensor;
namespace nn = engine::nn;
namespace ops = engine::ops;

namespace {

constexpr int64_t kSpatial = 9;  // 84 -> 20 (8x8 stride 4) -> 9 (4x4 stride 2)
constexpr int64_t kObservation = int64_t{Breakout::kStack} * Breakout::kFramePixels;

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: independent-looking seeds from nearby ones
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// An action drawn from softmax(logits).
int sample_action(const std::vector<float>& logits, engine::Rng& rng) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp(static_cast<double>(logits[i] - mx));
  double u = rng.uniform() * total;
  for (size_t i = 0; i < p.size(); ++i) {
    if ((u -= p[i]) < 0) return static_cast<int>(i);
  }
  return static_cast<int>(p.size() - 1);
}

Tensor observation_tensor(const std::vector<float>& obs, int64_t n, Device device) {
  engine::CategoryScope category(vocabulary::Category::inputs);
  return Tensor::from_vector({n, Breakout::kStack, Breakout::kSize, Breakout::kSize}, obs, device);
}

}  // namespace

A3cConfig a3c_config(const std::string& preset) {
  A3cConfig c;
  if (preset == "full") return c;  // the paper's network and setting, 8 learners
  if (preset == "small") {
    // The same network and game (the Atari net is CPU-sized already): 2 learners, 10 updates
    // per iteration, for benchmarking on a small CPU.
    c.learners = 2;
    c.updates_per_iteration = 10;
    return c;
  }
  if (preset == "tiny") {
    // Half-width convolutions on an easy game that two learners learn within about 60,000 steps
    // (the convergence test): two rows of 1-point bricks just above the paddle, a wide paddle
    // that does not shrink, a big slow ball that does not speed up and is served without FIRE,
    // 3 lives, short episodes. RMSProp's epsilon is 1e-5 (A2C's): with the paper's 0.1 the
    // small gradients of this short run hardly move the weights. lr 3e-4: 5e-4 learns sooner
    // but swings more once it has.
    c.conv1_channels = 8;
    c.conv2_channels = 16;
    c.learners = 2;
    c.updates_per_iteration = 8;
    c.lr = 3e-4;
    c.rms_eps = 1e-5;
    c.game.brick_rows = 2;
    c.game.wall_top = 137;
    c.game.paddle_width = 48;
    c.game.shrink_paddle = false;
    c.game.paddle_speed = 4.0f;
    c.game.ball_speed = 2.0f;
    c.game.ball_width = 6;
    c.game.ball_height = 8;
    c.game.speed_up = false;
    c.game.auto_serve = true;
    c.game.lives = 3;
    c.game.walls = 1;
    c.game.noop_max = 8;
    c.game.max_frames = 2000;
    return c;
  }
  throw std::invalid_argument("unknown a3c preset '" + preset + "' (tiny, small, full)");
}

int64_t a3c_parameter_count(const A3cConfig& c) {
  const int64_t c1 = c.conv1_channels, c2 = c.conv2_channels, h = c.hidden, a = c.actions;
  return c1 * (Breakout::kStack * 8 * 8 + 1) + c2 * (c1 * 4 * 4 + 1) + h * (c2 * kSpatial * kSpatial + 1) +
         a * (h + 1) + (h + 1);
}

// ---------------------------------------------------------------- the network

A3cNet::A3cNet(const A3cConfig& c, Device device, uint64_t seed) : Module(device) {
  if (c.conv1_channels < 1 || c.conv2_channels < 1 || c.hidden < 1 || c.actions < 2) {
    throw std::invalid_argument("a3c: channels and hidden units must be positive, and there must be 2+ actions");
  }
  engine::Rng rng(seed);
  conv1_ = register_module(
      "conv1",
      std::make_shared<nn::Conv2d>(nn::conv_options(Breakout::kStack, c.conv1_channels, 8, 4, 0, true), device, rng));
  conv2_ = register_module(
      "conv2",
      std::make_shared<nn::Conv2d>(nn::conv_options(c.conv1_channels, c.conv2_channels, 4, 2, 0, true), device, rng));
  fc_ = register_module("fc",
                        std::make_shared<nn::Linear>(c.conv2_channels * kSpatial * kSpatial, c.hidden, device, rng));
  policy_ = register_module("policy", std::make_shared<nn::Linear>(c.hidden, c.actions, device, rng));
  value_ = register_module("value", std::make_shared<nn::Linear>(c.hidden, 1, device, rng));
}

A3cNet::Output A3cNet::forward(const Tensor& frames) const {
  auto s = scope();
  Tensor h = ops::relu(conv1_->forward(frames));
  h = ops::relu(conv2_->forward(h));
  h = ops::relu(fc_->forward(ops::flatten(h)));
  return {policy_->forward(h), value_->forward(h)};
}

// ---------------------------------------------------------------- the loss

Tensor a3c_loss(const A3cNet& net, const Rollout& r, const A3cConfig& c, double* entropy) {
  const int64_t t_len = r.steps();
  if (t_len < 1 || static_cast<int64_t>(r.rewards.size()) != t_len ||
      static_cast<int64_t>(r.states.size()) != t_len * kObservation) {
    throw std::invalid_argument("a3c_loss: a rollout needs T >= 1 states, actions and rewards");
  }
  const Device device = net.device();
  const A3cNet::Output out = net.forward(observation_tensor(r.states, t_len, device));
  const int64_t a = out.logits.size(1);

  // n-step returns and advantages on the host: T values, constants for the gradient.
  std::vector<float> returns(static_cast<size_t>(t_len)), weights(static_cast<size_t>(t_len * a), 0.0f);
  const std::vector<float> values = out.value.to_vector();
  double ret = r.bootstrap;
  for (int64_t t = t_len - 1; t >= 0; --t) {
    ret = r.rewards[static_cast<size_t>(t)] + c.gamma * ret;
    returns[static_cast<size_t>(t)] = static_cast<float>(ret);
  }
  for (int64_t t = 0; t < t_len; ++t) {
    const int act = r.actions[static_cast<size_t>(t)];
    if (act < 0 || act >= a) throw std::invalid_argument("a3c_loss: action out of range");
    weights[static_cast<size_t>(t * a + act)] = returns[static_cast<size_t>(t)] - values[static_cast<size_t>(t)];
  }

  static const std::string path = "loss";
  static const auto id = engine::op_name(path);
  engine::OwnerScope owner(&path, id);
  const Tensor w = Tensor::from_vector({t_len, a}, weights, device);
  const Tensor target = Tensor::from_vector({t_len, 1}, returns, device);
  const Tensor logp = ops::log_softmax(out.logits);
  const Tensor policy = ops::scale(ops::sum(ops::mul(logp, w)), -1.0f);  // -sum_t A_t log pi(a_t|s_t)
  const Tensor neg_entropy = ops::sum(ops::mul(ops::exp(logp), logp));   // -sum_t H(pi(.|s_t))
  const Tensor diff = ops::add(out.value, ops::scale(target, -1.0f));
  const Tensor value = ops::sum(ops::mul(diff, diff));
  if (entropy) *entropy = -static_cast<double>(neg_entropy.item()) / static_cast<double>(t_len);
  return ops::add(ops::add(policy, ops::scale(neg_entropy, static_cast<float>(c.entropy_beta))),
                  ops::scale(value, static_cast<float>(c.value_coef)));
}

double mean_episode_score(const BreakoutConfig& game_config, const A3cNet* net, int64_t episodes, uint64_t seed,
                          EvalActing acting) {
  if (episodes < 1) throw std::invalid_argument("mean_episode_score: needs at least one episode");
  engine::NoGradScope no_grad;
  double total = 0;
  std::vector<float> obs(static_cast<size_t>(kObservation));
  for (int64_t e = 0; e < episodes; ++e) {
    Breakout game(game_config, seed + static_cast<uint64_t>(e));
    engine::Rng policy(mix(seed + static_cast<uint64_t>(e)));
    while (!game.over()) {
      int action = 0;
      if (!net) {
        action = static_cast<int>(policy.integer(Breakout::kActions));
      } else {
        game.observation(obs.data());
        const std::vector<float> logits = net->forward(observation_tensor(obs, 1, net->device())).logits.to_vector();
        if (acting == EvalActing::sample) {
          action = sample_action(logits, policy);
        } else if (policy.uniform() < 0.05) {
          action = static_cast<int>(policy.integer(Breakout::kActions));
        } else {
          action = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        }
      }
      game.step(action);
    }
    total += game.score();
  }
  return total / static_cast<double>(episodes);
}

// ---------------------------------------------------------------- the workload

namespace {

struct PhaseNames {
  profiler::StringId acting, waiting;
};

const PhaseNames& phase_names() {
  static const PhaseNames n{profiler::Tracer::global().intern("acting"), profiler::Tracer::global().intern("waiting")};
  return n;
}

// What a learner did during one iteration.
struct LearnerStats {
  int64_t env_steps = 0, updates = 0;
  int64_t acting_ns = 0, learning_ns = 0, waiting_ns = 0;
  double loss_sum = 0, entropy_sum = 0;
  std::vector<double> episode_scores;
};

// One actor-learner: its game, its local network and its random stream. Used by its own
// thread only; the shared parameters and optimizer are passed in.
class Learner {
 public:
  Learner(const A3cConfig& c, Device device, uint64_t seed)
      : cfg_(c),
        device_(device),
        game_(c.game, mix(seed)),
        rng_(mix(seed ^ 0x5bd1e995ULL)),
        net_(c, device, seed),
        params_(net_.parameters()),
        obs_(static_cast<size_t>(kObservation)) {
    game_.observation(obs_.data());
  }

  LearnerStats stats;

  // One rollout and update (the paper's Algorithm S3, one pass of its loop): against the shared
  // network and optimizer of this process, or, with a parameter server (`service`), against
  // the servers' parameters, whose RMSProp runs there.
  void update(Phases& phases, engine::optim::RmsProp& shared_opt, engine::optim::ParameterService* service) {
    const auto& names = phase_names();
    Rollout r;
    const int64_t t0 = vocabulary::now_ns();
    {
      profiler::Range acting(names.acting, profiler::EventKind::phase);
      engine::NoGradScope no_grad;
      engine::CategoryScope category(vocabulary::Category::activations);
      if (service) {
        versions_ = service->read(0, params_);
      } else {
        sync(shared_opt.params());
      }
      act(r);
    }
    const int64_t t1 = vocabulary::now_ns();
    Tensor loss;
    double entropy = 0;
    phases.forward([&] { loss = a3c_loss(net_, r, cfg_, &entropy); });
    phases.backward([&] { loss.backward(); });
    phases.optimizer([&] {
      engine::optim::clip_grad_norm(params_, cfg_.max_grad_norm);
      std::vector<Tensor> grads;
      grads.reserve(params_.size());
      for (const Tensor& p : params_) grads.push_back(p.grad());
      if (service) {
        service->push(0, grads, versions_);
      } else {
        shared_opt.step(grads);
      }
      for (Tensor& p : params_) p.zero_grad();
    });
    stats.acting_ns += t1 - t0;
    stats.learning_ns += vocabulary::now_ns() - t1;
    stats.env_steps += r.steps();
    stats.updates += 1;
    stats.loss_sum += loss.item();
    stats.entropy_sum += entropy;
  }

 private:
  // The local network takes the shared parameters (read while other learners may write them:
  // Hogwild, see engine/cpu/optim.cpp).
  void sync(const std::vector<Tensor>& shared) {
    for (size_t i = 0; i < params_.size(); ++i) engine::backend_of(params_[i]).copy(shared[i], params_[i]);
  }

  // Up to t_max steps with the policy of the local network, stopping at the end of an episode.
  void act(Rollout& r) {
    // t_max is the user's --batch: checked, so that too long a rollout says how many bytes it asks.
    r.states.reserve(engine::cpu::check_host_buffer({cfg_.t_max, kObservation}, sizeof(float), "a3c rollout states"));
    for (int64_t t = 0; t < cfg_.t_max; ++t) {
      const int action = sample_action(net_.forward(observation_tensor(obs_, 1, device_)).logits.to_vector(), rng_);
      r.states.insert(r.states.end(), obs_.begin(), obs_.end());
      r.actions.push_back(action);
      const BreakoutStep s = game_.step(action);
      r.rewards.push_back(static_cast<float>(cfg_.clip_rewards ? std::clamp(s.reward, -1.0, 1.0) : s.reward));
      if (s.terminal) {
        stats.episode_scores.push_back(game_.score());
        game_.reset();
        game_.observation(obs_.data());
        r.bootstrap = 0;
        return;
      }
      game_.observation(obs_.data());
      if (s.life_lost && cfg_.life_loss_terminal) {
        r.bootstrap = 0;
        return;
      }
    }
    r.bootstrap = net_.forward(observation_tensor(obs_, 1, device_)).value.item();
  }

  A3cConfig cfg_;
  Device device_;
  Breakout game_;
  engine::Rng rng_;
  A3cNet net_;
  std::vector<Tensor> params_;
  engine::optim::ParameterService::Versions versions_;  // of the servers' values params_ holds
  std::vector<float> obs_;
};

engine::optim::RmsPropOptions rmsprop_options(const A3cConfig& c) {
  engine::optim::RmsPropOptions o;
  o.lr.base_lr = c.lr;  // constant
  o.alpha = c.rms_alpha;
  o.eps = c.rms_eps;
  o.eps_inside_sqrt = true;  // the A3C paper's form
  return o;
}

class A3cWorkload final : public Workload {
 public:
  A3cWorkload(const A3cConfig& cfg, uint64_t seed, Device device, const DataShard& shard)
      : cfg_(cfg),
        seed_(seed),
        learner_seed_(shard_seed(seed, shard)),
        device_(device),
        model_(std::make_shared<A3cNet>(cfg, device, seed)),
        opt_(model_->parameters(), rmsprop_options(cfg)) {
    if (cfg.learners < 1 || cfg.t_max < 1 || cfg.updates_per_iteration < 1) {
      throw std::invalid_argument("a3c: learners, t_max and updates per iteration must be positive");
    }
  }

  ~A3cWorkload() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  nn::Module& model() override { return *model_; }
  int64_t batch_size() const override { return cfg_.t_max; }
  double learning_rate() const override { return opt_.current_lr(); }
  // The shared RMSProp; each learner clips its own gradient before applying it.
  std::vector<engine::optim::OptimizerRecipe> optimizer_recipes() override {
    return {engine::optim::rmsprop_recipe(opt_.options(), cfg_.max_grad_norm)};
  }
  // On a parameter server the learners read the servers' parameters and push their clipped
  // gradients there (asynchronously: no learner waits for another's update, in this process
  // or any other); the servers' RMSProp takes the place of the shared one.
  bool take_parameter_service(engine::optim::ParameterService& service) override {
    service_ = &service;
    return true;
  }

  // Mean score over `batches` episodes (10 when 0) of the shared network's most likely actions,
  // 5% of them random (DQN's evaluation: what the policy has learned, without the noise of its
  // remaining entropy; the random 5% press FIRE where the greedy policy never would).
  Quality evaluate(int64_t batches) override {
    const int64_t episodes = batches > 0 ? batches : 10;
    return {"mean_episode_score", mean_episode_score(cfg_.game, model_.get(), episodes, kA3cEvalSeed), "points", true};
  }

  // One iteration: the learners take updates_per_iteration updates between them (whoever is
  // free takes the next), then wait for one another. Samples = environment steps (agent steps,
  // frame_skip frames each).
  StepResult step(Phases& phases) override {
    start_learners();
    const int64_t start = vocabulary::now_ns();
    {
      std::lock_guard lock(mutex_);
      phases_ = &phases;
      tickets_.store(cfg_.updates_per_iteration);
      finished_ = reported_ = 0;
      for (auto& l : learners_) l->stats = LearnerStats{};
      ++generation_;
    }
    cv_.notify_all();
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return reported_ == static_cast<int64_t>(learners_.size()); });
      phases_ = nullptr;
      if (!error_.empty()) throw std::runtime_error("a3c learner: " + error_);
    }
    return summarise(static_cast<double>(vocabulary::now_ns() - start) * 1e-9);
  }

  std::vector<Metric> iteration_metrics() override { return iteration_metrics_; }

  std::vector<Metric> run_metrics() override {
    std::vector<Metric> m = {{"env_steps_total", static_cast<double>(total_.env_steps), "steps"},
                             {"frames_total", static_cast<double>(total_.env_steps * cfg_.game.frame_skip), "frames"},
                             {"updates_total", static_cast<double>(total_.updates), "updates"},
                             {"episodes_total", static_cast<double>(scores_.size()), "episodes"},
                             {"learners", static_cast<double>(cfg_.learners), "threads"}};
    if (!scores_.empty()) {
      // The usual RL figure: the mean score of the last 100 finished episodes.
      const size_t n = std::min<size_t>(100, scores_.size());
      double sum = 0;
      for (size_t i = scores_.size() - n; i < scores_.size(); ++i) sum += scores_[i];
      m.push_back({"episode_reward_last100_mean", sum / static_cast<double>(n), "points"});
      m.push_back({"episode_reward_max", *std::max_element(scores_.begin(), scores_.end()), "points"});
    }
    add_split(m, "", run_split_);
    for (size_t i = 0; i < learner_split_.size(); ++i)
      add_split(m, "learner." + std::to_string(i) + ".", learner_split_[i]);
    return m;
  }

 private:
  struct Split {
    int64_t acting_ns = 0, learning_ns = 0, waiting_ns = 0;
  };

  static void add_split(std::vector<Metric>& m, const std::string& prefix, const Split& s) {
    const double total = static_cast<double>(s.acting_ns + s.learning_ns + s.waiting_ns);
    if (total <= 0) return;
    m.push_back({prefix + "acting_fraction", static_cast<double>(s.acting_ns) / total, ""});
    m.push_back({prefix + "learning_fraction", static_cast<double>(s.learning_ns) / total, ""});
    m.push_back({prefix + "waiting_fraction", static_cast<double>(s.waiting_ns) / total, ""});
  }

  void start_learners() {
    if (!threads_.empty()) return;
    engine::backend_for(device_);  // made on this thread first: its set-up (denormals) is inherited
    for (int64_t i = 0; i < cfg_.learners; ++i) {
      learners_.push_back(
          std::make_unique<Learner>(cfg_, device_, mix(learner_seed_ * 1315423911ULL + static_cast<uint64_t>(i))));
    }
    learner_split_.assign(learners_.size(), Split{});
    for (auto& l : learners_) threads_.emplace_back([this, learner = l.get()] { learner_main(*learner); });
  }

  void learner_main(Learner& learner) {
    engine::set_op_threads(1);  // parallelism comes from the learners, not from inside their ops
    const auto& names = phase_names();
    const auto n = static_cast<int64_t>(learners_.size());
    uint64_t seen = 0;
    for (;;) {
      Phases* phases = nullptr;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        phases = phases_;
      }
      while (!failed_.load() && tickets_.fetch_sub(1) > 0) {
        try {
          learner.update(*phases, opt_, service_);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex_);
          if (error_.empty()) error_ = e.what();
          failed_.store(true);
        }
      }
      // Waiting: from this learner's last update to the end of the slowest one's.
      const int64_t done = vocabulary::now_ns();
      {
        profiler::Range waiting(names.waiting, profiler::EventKind::phase);
        std::unique_lock lock(mutex_);
        if (++finished_ == n) cv_.notify_all();
        cv_.wait(lock, [&] { return finished_ == n || stop_; });
      }
      {
        std::lock_guard lock(mutex_);
        learner.stats.waiting_ns = vocabulary::now_ns() - done;
        ++reported_;
      }
      cv_.notify_all();
    }
  }

  StepResult summarise(double seconds) {
    LearnerStats all;
    double loss_sum = 0;
    std::vector<Metric>& m = iteration_metrics_;
    m.clear();
    Split split;
    for (size_t i = 0; i < learners_.size(); ++i) {
      const LearnerStats& s = learners_[i]->stats;
      all.env_steps += s.env_steps;
      all.updates += s.updates;
      loss_sum += s.loss_sum;
      all.entropy_sum += s.entropy_sum;
      all.episode_scores.insert(all.episode_scores.end(), s.episode_scores.begin(), s.episode_scores.end());
      const std::string p = "learner." + std::to_string(i) + ".";
      m.push_back({p + "acting_ms", static_cast<double>(s.acting_ns) * 1e-6, "ms"});
      m.push_back({p + "learning_ms", static_cast<double>(s.learning_ns) * 1e-6, "ms"});
      m.push_back({p + "waiting_ms", static_cast<double>(s.waiting_ns) * 1e-6, "ms"});
      m.push_back({p + "updates", static_cast<double>(s.updates), "updates"});
      Split& ls = learner_split_[i];
      ls.acting_ns += s.acting_ns;
      ls.learning_ns += s.learning_ns;
      ls.waiting_ns += s.waiting_ns;
      split.acting_ns += s.acting_ns;
      split.learning_ns += s.learning_ns;
      split.waiting_ns += s.waiting_ns;
    }
    run_split_.acting_ns += split.acting_ns;
    run_split_.learning_ns += split.learning_ns;
    run_split_.waiting_ns += split.waiting_ns;
    add_split(m, "", split);
    m.push_back({"env_steps_per_s", static_cast<double>(all.env_steps) / seconds, "steps/s"});
    m.push_back({"frames_per_s", static_cast<double>(all.env_steps * cfg_.game.frame_skip) / seconds, "frames/s"});
    m.push_back({"updates_per_s", static_cast<double>(all.updates) / seconds, "updates/s"});
    m.push_back({"policy_entropy", all.updates > 0 ? all.entropy_sum / static_cast<double>(all.updates) : 0.0, "nats"});
    m.push_back({"episodes", static_cast<double>(all.episode_scores.size()), "episodes"});
    if (!all.episode_scores.empty()) {
      double sum = 0;
      for (double s : all.episode_scores) sum += s;
      m.push_back({"episode_reward_mean", sum / static_cast<double>(all.episode_scores.size()), "points"});
      m.push_back(
          {"episode_reward_max", *std::max_element(all.episode_scores.begin(), all.episode_scores.end()), "points"});
    }
    scores_.insert(scores_.end(), all.episode_scores.begin(), all.episode_scores.end());
    total_.env_steps += all.env_steps;
    total_.updates += all.updates;
    return {all.updates > 0 ? loss_sum / static_cast<double>(all.updates) : 0.0, all.env_steps};
  }

  A3cConfig cfg_;
  uint64_t seed_;
  uint64_t learner_seed_;  // the games and policies: apart on each parameter-server worker
  Device device_;
  std::shared_ptr<A3cNet> model_;                       // the shared parameters
  engine::optim::RmsProp opt_;                          // the shared optimizer (its square averages are shared too)
  engine::optim::ParameterService* service_ = nullptr;  // or the parameter server's
  std::vector<std::unique_ptr<Learner>> learners_;
  std::vector<std::thread> threads_;

  // The iteration hand-off between step() and the learner threads (all under mutex_).
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;  // bumped by step(): learners start an iteration
  Phases* phases_ = nullptr;
  int64_t finished_ = 0, reported_ = 0;
  bool stop_ = false;
  std::string error_;
  std::atomic<int64_t> tickets_{0};  // updates left in this iteration
  std::atomic<bool> failed_{false};

  std::vector<Metric> iteration_metrics_;
  std::vector<double> scores_;  // every finished episode, in order
  LearnerStats total_;
  Split run_split_;
  std::vector<Split> learner_split_;
};

PresetTable describe(const A3cConfig& c) {
  const BreakoutConfig& g = c.game;
  const std::string stack = std::to_string(Breakout::kStack);
  return {
      {"architecture", "A3C feed-forward Atari network (Mnih et al. 2016, the DQN 2013 net), shared by the learners"},
      {"input", std::to_string(Breakout::kSize) + "x" + std::to_string(Breakout::kSize) + " grayscale, " + stack +
                    " frames stacked, values in [0, 1]"},
      {"conv1", std::to_string(c.conv1_channels) + " filters 8x8 stride 4, bias, ReLU"},
      {"conv2", std::to_string(c.conv2_channels) + " filters 4x4 stride 2, bias, ReLU"},
      {"fc", std::to_string(c.hidden) + ", ReLU"},
      {"heads", "policy: linear -> " + std::to_string(c.actions) + " logits, softmax; value: linear -> 1"},
      {"init", "conv Kaiming-normal fan_out, zero bias; linear uniform +-1/sqrt(fan_in)"},
      {"learners", std::to_string(c.learners) + " actor-learner threads, one game each, ops single-threaded"},
      {"t_max", std::to_string(c.t_max) + " steps per rollout (n-step returns, bootstrapped from V)"},
      {"iteration", std::to_string(c.updates_per_iteration) + " updates by all learners together"},
      {"gamma", table_number(c.gamma)},
      {"loss", "sum_t [-log pi(a_t|s_t) (R_t - V(s_t)) - " + table_number(c.entropy_beta) + " H(pi(s_t))] + " +
                   table_number(c.value_coef) + " sum_t (R_t - V(s_t))^2"},
      {"optimizer", "shared RMSProp (statistics shared by the learners), lr " + table_number(c.lr) +
                        " constant, decay " + table_number(c.rms_alpha) + ", eps " + table_number(c.rms_eps) +
                        " inside the square root; lock-free (Hogwild) updates"},
      {"gradient_clipping", "global norm " + table_number(c.max_grad_norm) + " per update"},
      {"rewards", c.clip_rewards ? "clipped to [-1, 1] for learning; episode scores unclipped" : "unclipped"},
      {"game", "Breakout (workloads/a3c/breakout.h): " + std::to_string(g.brick_rows) + "x" +
                   std::to_string(g.brick_columns) + " bricks from y " + std::to_string(g.wall_top) + ", paddle " +
                   std::to_string(g.paddle_width) + (g.shrink_paddle ? " (halves at the top wall)" : "") + ", ball " +
                   table_number(g.ball_speed) + " px/frame" + (g.speed_up ? " speeding up" : "") + ", " +
                   std::to_string(g.lives) + " lives, " + std::to_string(g.walls) + " wall(s)"},
      {"frames", "frame skip " + std::to_string(g.frame_skip) + ", " + stack + " stacked, up to " +
                     std::to_string(g.noop_max) + " no-op steps at the start, episodes cut at " +
                     std::to_string(g.max_frames) + " frames"},
      {"actions", "NOOP, FIRE, RIGHT, LEFT (ALE's minimal set)"},
      {"samples", "environment steps (agent steps of frame_skip frames)"},
      {"quality", "mean episode score of the shared network's most likely actions (5% random) on fixed game seeds"},
      {"batch_size", std::to_string(c.t_max) + " (the rollout)"}};
}

// `summary` writes the one-line text around the configuration's numbers.
Preset make_preset(const std::string& name, std::string (*summary)(const A3cConfig&)) {
  const A3cConfig c = a3c_config(name);
  return {name, summary(c), c.t_max, describe(c)};
}

std::string learners(const A3cConfig& c) { return std::to_string(c.learners) + " learners"; }

}  // namespace

std::unique_ptr<Workload> make_a3c_workload(const A3cConfig& config, uint64_t seed, Device device,
                                            const DataShard& shard) {
  return std::make_unique<A3cWorkload>(config, seed, device, shard);
}

WorkloadSpec a3c_spec() {
  WorkloadSpec s;
  s.name = "a3c";
  s.domain = "reinforcement learning";
  s.units = {"environment steps", "", "rollout steps", false};
  const A3cConfig full = a3c_config("full");
  s.description = "A3C: asynchronous actor-learner threads with Hogwild updates to a shared Atari network (conv " +
                  std::to_string(full.conv1_channels) + " 8x8/4, conv " + std::to_string(full.conv2_channels) +
                  " 4x4/2, fc " + std::to_string(full.hidden) +
                  ", policy + value), shared RMSProp, on a native Breakout";
  s.presets = {
      make_preset(
          "tiny",
          [](const A3cConfig& c) { return "half-width convolutions, " + learners(c) + " on an easy Breakout: tests"; }),
      make_preset("small",
                  [](const A3cConfig& c) { return "the Atari network, " + learners(c) + ": CPU benchmarking"; }),
      make_preset("full", [](const A3cConfig& c) {
        return "the paper's setting: the Atari network (" + grouped_count(a3c_parameter_count(c)) + " parameters), " +
               learners(c);
      })};
  s.has_learners = true;
  s.check = [](const WorkloadConfig& wc) {
    a3c_config(wc.preset);
    data_shard(wc, "a3c");
    if (wc.learners < 0) throw std::invalid_argument("a3c: learners must be positive");
    if (wc.data != "synthetic") {
      throw std::invalid_argument("a3c plays its own Breakout game (--data synthetic), got '" + wc.data + "'");
    }
  };
  s.build = [](const WorkloadConfig& wc) -> std::unique_ptr<Workload> {
    const DataShard shard = data_shard(wc, "a3c");
    A3cConfig cfg = a3c_config(wc.preset);
    cfg.t_max = *wc.batch;  // --batch is the rollout length
    if (wc.learners > 0) cfg.learners = wc.learners;
    return make_a3c_workload(cfg, wc.seed, wc.device, shard);
  };
  return s;
}

}  // namespace ts::workloads
