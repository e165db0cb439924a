#pragma once
// What a workload supplies to the one training loop: its model, data, loss, optimizer and
// quality metric, or its own step where one iteration is more than forward-backward-update
// (wgan's critic steps; a3c's actor-learners).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/nn/module.h"
#include "engine/optim/optimizer_recipe.h"
#include "engine/optim/parameter_service.h"
#include "engine/optim/split_step.h"
#include "engine/tensor.h"

namespace ts::workloads {

// A preset's hyper-parameters as rows of text: key, value.
using PresetTable = std::vector<std::pair<std::string, std::string>>;

// One preset: its architecture hyper-parameters as a table (written into the run record, so
// that anyone can rebuild the same model elsewhere) and its default batch size. Each workload
// writes a preset's values once, in its configuration (`<name>_config(preset)`); the table, the
// default batch and the numbers in the summary are read from it, so they cannot disagree with
// the model that is built.
struct Preset {
  std::string name;  // tiny | small | full
  std::string summary;
  int64_t default_batch = 1;
  PresetTable table;
};

// A number as a presets table shows it: shortest form, no trailing zeros (0.1, 1e-09, 64).
std::string table_number(double v);
// A small constant as papers write it, in powers of ten without padding (1e-4, 1e-9, 2.5e-4).
std::string table_exponent(double v);
// Numbers joined by commas, no spaces (blocks 3,4,6,3; anchor ratios 0.5,1,2).
std::string table_list(std::span<const int64_t> values);
std::string table_list(std::span<const float> values);
// A count with its thousands grouped, as summaries write it (8,000; 17,191).
std::string grouped_count(int64_t n);

struct WorkloadConfig {
  std::string preset = "tiny";
  engine::Device device = engine::Device::cpu();
  std::optional<int64_t> batch;  // unset: the preset's default (WorkloadSpec::batch_of resolves it)
  uint64_t seed = 1;
  std::string data = "synthetic";  // or a data set name/path the workload understands
  int64_t learners = 0;            // actor-learner threads (workloads with has_learners); 0: the preset's
  // Data parallelism (distributed/): this process is rank `rank` of `world_size`. Each rank reads its
  // own shard of the data; the model is built the same on every rank (rank 0's is broadcast).
  int rank = 0;
  int world_size = 1;
};

struct Batch {
  engine::Tensor inputs;
  engine::Tensor labels;
  int64_t samples = 0;
};

struct Quality {
  std::string metric;  // e.g. "accuracy"
  double value = 0;
  std::string unit;
  bool higher_is_better = true;
};

// The phases of one iteration (training_loop.cpp): each call opens the phase's profiler range
// and memory-category scope, runs `f`, and closes them. A step may run a phase several times
// (wgan's critic steps); the figures add them up per iteration. A step may also call them from
// several threads at once (a3c's learners): the scopes are per thread, and so are the ranges.
class Phases {
 public:
  virtual ~Phases() = default;
  virtual void data(const std::function<void()>& f) = 0;
  virtual void forward(const std::function<void()>& f) = 0;
  // `group` names the gradient group (Workload::gradient_groups) this backward produces, whose
  // gradients data parallelism averages across ranks before the phase ends.
  virtual void backward(const std::function<void()>& f, int group = 0) = 0;
  virtual void optimizer(const std::function<void()>& f) = 0;
};

// A measurement beyond loss and throughput (a3c: environment steps/s, episode rewards, each
// learner's acting/learning/waiting time), stored in the run's metrics.
struct Metric {
  std::string name;
  double value = 0;
  std::string unit;
};

// What one iteration reports.
struct StepResult {
  double loss = 0;
  int64_t samples = 0;
  int64_t tokens = 0;  // sequence workloads: real (unpadded) source + target tokens
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual engine::nn::Module& model() = 0;
  virtual int64_t batch_size() const = 0;
  virtual double learning_rate() const = 0;
  // Quality on held-out data (`batches` batches), in eval mode; the model is put back to training.
  virtual Quality evaluate(int64_t batches) = 0;

  // One training iteration. The default is one forward-backward-update through the four hooks
  // below; workloads whose iteration is more than that (wgan's five critic steps and a
  // generator step) override it; they may still supply next_batch() (what their data phase
  // draws, which the shard tests read) and leave the other hooks alone.
  virtual StepResult step(Phases& phases);
  virtual Batch next_batch();                               // the data phase
  virtual engine::Tensor forward_loss(const Batch& batch);  // the forward phase, a scalar loss
  virtual void optimizer_step();                            // the optimizer phase
  virtual void zero_grad();

  // The parameters each backward phase produces gradients for, one list per group; a step's
  // phases.backward(f, g) says which group (wgan: 0 the critic, 1 the generator). Data
  // parallelism averages a group's gradients across ranks at the end of its backward. One
  // group, every parameter of model(), by default.
  virtual std::vector<std::vector<engine::Tensor>> gradient_groups() { return {model().parameters()}; }

  // The optimizer step cut per parameter (engine/optim/split_step.h), for data parallelism's
  // cross-barrier scheduling; none where the step needs every gradient first (global-norm
  // clipping) or an iteration has several steps. When data parallelism takes it, the optimizer
  // phase no longer runs the function the step passes to it: the split step does that work.
  virtual std::optional<engine::optim::SplitStep> split_step() { return std::nullopt; }

  // How the parameter server updates each gradient group (gradient_groups()): one recipe per
  // group, the same optimizer the workload's own step runs, so a server's update of a key is the
  // workload's update of that part of the parameter. Empty: the workload cannot train on a
  // parameter server.
  virtual std::vector<engine::optim::OptimizerRecipe> optimizer_recipes() { return {}; }

  // A workload whose learners update asynchronously from threads of their own (a3c) takes the
  // parameter server's worker here and reads and pushes through it from those threads
  // (engine/optim/parameter_service.h); the loop's phases then neither gate its forwards nor
  // push its backwards' gradients, and its optimizer phase runs (the learners' pushes). The
  // service outlives every step. Others return false: the phases do the pushing.
  virtual bool take_parameter_service(engine::optim::ParameterService& /*service*/) { return false; }

  // Extra metrics: asked for after every step() (stored with that iteration) and once after
  // the last one (stored for the whole run). None by default.
  virtual std::vector<Metric> iteration_metrics() { return {}; }
  virtual std::vector<Metric> run_metrics() { return {}; }
};

// What a workload's throughput counts (docs/formulas.md, "Throughput"), as plural nouns:
// `samples`, the unit of StepResult::samples; `tokens`, of StepResult::tokens where a workload
// counts finer work than its samples (empty: none); `batch`, what a preset's batch size counts.
// The headline rate is the tokens' where `tokens_headline` (their batches vary in length, or the
// batch is a token budget), else the samples'.
struct ThroughputUnits {
  std::string samples = "samples";
  std::string tokens;
  std::string batch = "samples";
  bool tokens_headline = false;

  // The headline's noun ("tokens", "images") and its count in one iteration's result.
  const std::string& headline() const { return tokens_headline && !tokens.empty() ? tokens : samples; }
  int64_t headline_count(int64_t sample_count, int64_t token_count) const {
    return tokens_headline && !tokens.empty() && token_count > 0 ? token_count : sample_count;
  }
};

struct WorkloadSpec {
  std::string name;
  std::string domain;
  std::string description;
  ThroughputUnits units;
  std::vector<Preset> presets;
  // Builds the model, its data and optimizer. The config it receives always has its batch: create()
  // resolves it (batch_of), so no workload falls back to its preset on its own.
  std::function<std::unique_ptr<Workload>(const WorkloadConfig&)> build;
  // Checks a config without building anything (bad data source...): throws std::invalid_argument.
  std::function<void(const WorkloadConfig&)> check;
  // Whether it runs actor-learner threads whose count WorkloadConfig::learners sets (a3c).
  bool has_learners = false;
  // A preset's parameter count without building anything, where building is slow (the translation
  // workloads make their corpus first: seconds); the count of the model build() makes from the
  // synthetic data. Empty: parameter_count() builds on the meta device.
  std::function<int64_t(const std::string& preset)> count_parameters;

  const Preset* preset(const std::string& name) const;
  // The batch a run of `preset` trains with: `batch` where given, else the preset's default.
  // The one place a batch is resolved. Throws std::invalid_argument for an unknown preset.
  int64_t batch_of(const std::string& preset, std::optional<int64_t> batch) const;
  // build() with the batch resolved.
  std::unique_ptr<Workload> create(WorkloadConfig config) const;
  // The parameters of `preset`'s model (`trainscope list`): count_parameters where given, else the
  // model create() builds on the meta device, which allocates nothing.
  int64_t parameter_count(const std::string& preset) const;
};

// Every registered workload, in TBD's order.
const std::vector<WorkloadSpec>& registry();
const WorkloadSpec* find_workload(const std::string& name);
std::vector<std::string> workload_names();

}  // namespace ts::workloads
