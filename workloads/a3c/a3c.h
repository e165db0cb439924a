#pragma once
// A3C (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning"): N
// actor-learner threads, each with its own Breakout game and a local copy of the network,
// update shared parameters asynchronously and without locks (Hogwild). The network is the
// paper's Atari one (from DQN, Mnih et al. 2013): conv 16 8x8 stride 4, conv 32 4x4 stride 2,
// fully connected 256, all ReLU, then a softmax policy over the actions and a linear value.
// Each learner: copy the shared parameters, act t_max steps (or to the end of the episode),
// compute n-step returns bootstrapped from V, the loss (policy gradient with advantage,
// entropy bonus 0.01, value regression), backward, clip the gradient norm, and apply it to the
// shared parameters with the shared RMSProp (lr 2.5e-4, decay 0.99, eps 0.1 inside the root).
// One iteration: `updates_per_iteration` such updates by all learners together.
// Decisions, presets and the game's rules: docs/workloads.md "## a3c".
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "workloads/a3c/breakout.h"
#include "workloads/data/shard.h"
#include "workloads/workload.h"

namespace ts::workloads {

struct A3cConfig {
  // The network.
  int64_t conv1_channels = 16, conv2_channels = 32, hidden = 256;
  int64_t actions = Breakout::kActions;
  // The algorithm.
  int64_t learners = 8;                // actor-learner threads
  int64_t t_max = 5;                   // steps per rollout (n of the n-step returns)
  int64_t updates_per_iteration = 40;  // rollouts + updates by all learners per iteration
  double gamma = 0.99;
  double entropy_beta = 0.01;
  double value_coef = 0.5;  // loss = policy - beta entropy + value_coef sum (R - V)^2
  double lr = 2.5e-4;
  double rms_alpha = 0.99, rms_eps = 0.1;
  double max_grad_norm = 40;
  bool clip_rewards = true;        // the learner sees rewards clipped to [-1, 1]
  bool life_loss_terminal = true;  // returns stop at a lost life (DQN's training rule); the game goes on
  BreakoutConfig game;
};

// Throws std::invalid_argument for an unknown preset.
A3cConfig a3c_config(const std::string& preset);

// The parameter count that follows from the configuration alone (tested against the model):
// conv1 c1 (4 8 8 + 1), conv2 c2 (c1 4 4 + 1), fc h (c2 9 9 + 1), policy A (h + 1), value h + 1.
int64_t a3c_parameter_count(const A3cConfig& c);

class A3cNet : public engine::nn::Module {
 public:
  A3cNet(const A3cConfig& c, engine::Device device, uint64_t seed);
  struct Output {
    engine::Tensor logits;  // [N, A], the policy's (before the softmax)
    engine::Tensor value;   // [N, 1]
  };
  // frames [N, 4, 84, 84] in [0, 1].
  Output forward(const engine::Tensor& frames) const;

 private:
  std::shared_ptr<engine::nn::Conv2d> conv1_, conv2_;
  std::shared_ptr<engine::nn::Linear> fc_, policy_, value_;
};

// One learner's rollout: t <= t_max states, the actions taken there and the (clipped) rewards
// that followed, and V of the state after the last one (0 when the episode ended there).
struct Rollout {
  std::vector<float> states;  // [T, 4, 84, 84]
  std::vector<int> actions;
  std::vector<float> rewards;
  float bootstrap = 0;
  int64_t steps() const { return static_cast<int64_t>(actions.size()); }
};

// The A3C loss of `net` on a rollout: with R_t = r_t + gamma R_{t+1} (R_T = bootstrap) and
// A_t = R_t - V(s_t) held constant, sum_t [-log pi(a_t|s_t) A_t - beta H(pi(.|s_t))] +
// value_coef sum_t (R_t - V(s_t))^2. Records the graph for backward. `entropy` (optional)
// receives the mean policy entropy.
engine::Tensor a3c_loss(const A3cNet& net, const Rollout& rollout, const A3cConfig& c, double* entropy = nullptr);

// evaluate() plays the episodes whose games are seeded from here on.
inline constexpr uint64_t kA3cEvalSeed = 1'000'003;

// How an evaluated network picks actions: its most likely action, or a random one with
// probability 0.05 (DQN's evaluation protocol: pure greedy play could wait forever without
// pressing FIRE); or sampled from its policy, as the learners act.
enum class EvalActing { epsilon_greedy, sample };

// The mean score of `episodes` Breakout episodes (game seeds seed, seed + 1, ...) played by
// `net`, or with uniformly random actions when `net` is null: the same games for all, so
// policies compare on equal terms.
double mean_episode_score(const BreakoutConfig& game, const A3cNet* net, int64_t episodes, uint64_t seed,
                          EvalActing acting = EvalActing::epsilon_greedy);

// The workload for a configuration (a3c_spec()'s create() makes it from a preset's). Learner
// threads start at the first step() and stop when it is destroyed. `shard`: this process among
// a parameter server's workers; its learners' games and policies are seeded apart from the
// other workers' (shard_seed), the network alike on all.
std::unique_ptr<Workload> make_a3c_workload(const A3cConfig& config, uint64_t seed, engine::Device device,
                                            const DataShard& shard = {});

WorkloadSpec a3c_spec();

}  // namespace ts::workloads
