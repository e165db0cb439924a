// The training loop drives the training strategy (engine/optim/gradient_exchange.h) in the
// order that header documents: a recording exchange and a scripted workload write into one log,
// so that a hook skipped, added or moved relative to the phases' work changes the log.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/nn/module.h"
#include "engine/nn/parameter_gate.h"
#include "engine/optim/gradient_exchange.h"
#include "engine/optim/parameter_service.h"
#include "workloads/training_loop.h"
#include "workloads/workload.h"

using namespace ts;
using namespace ts::workloads;
using Log = std::vector<std::string>;

namespace {

class NoGate final : public engine::nn::ParameterGate {
 public:
  void before_forward(const engine::nn::Module&) override {}
};

class NoService final : public engine::optim::ParameterService {
 public:
  Versions read(int, const std::vector<engine::Tensor>&) override { return {}; }
  void push(int, const std::vector<engine::Tensor>&, const Versions&) override {}
};

class RecordingExchange final : public engine::optim::GradientExchange {
 public:
  explicit RecordingExchange(Log& log) : log_(log) {}
  bool runs_workload_step = true;  // what begin_update answers
  int stop_at_call = -1;           // agree_stop's answer is true from this call on (0-based)
  bool offers_service = false;
  bool flush_throws = false;

  bool agree_stop(bool local) override {
    log_.push_back(std::string("agree_stop ") + (local ? "local" : "-"));
    return local || (stop_at_call >= 0 && stop_calls_++ >= stop_at_call);
  }
  engine::nn::ParameterGate* forward_gate() override {
    log_.push_back("forward_gate");
    return &gate;
  }
  void begin_forward() override { log_.push_back("begin_forward"); }
  void begin_backward(int group) override { log_.push_back("begin_backward " + std::to_string(group)); }
  void end_backward() override { log_.push_back("end_backward"); }
  bool begin_update() override {
    log_.push_back("begin_update");
    return runs_workload_step;
  }
  void flush() override {
    log_.push_back("flush");
    if (flush_throws) throw std::runtime_error("lost a rank");
  }
  engine::optim::ParameterService* parameter_service() override { return offers_service ? &service : nullptr; }
  std::string_view name() const override { return "recording"; }

  NoGate gate;
  NoService service;

 private:
  Log& log_;
  int stop_calls_ = 0;
};

// One iteration: data, forward, and two gradient groups each with its backward and update
// (wgan's shape), each phase's work logged, with the gate the forward's layers would see.
class ScriptedWorkload final : public Workload {
 public:
  explicit ScriptedWorkload(Log& log) : log_(log), model_(engine::Device::cpu()) {}
  bool takes_service = false;
  engine::optim::ParameterService* taken = nullptr;

  engine::nn::Module& model() override { return model_; }
  int64_t batch_size() const override { return 1; }
  double learning_rate() const override { return 0.1; }
  Quality evaluate(int64_t) override { return {}; }
  StepResult step(Phases& phases) override {
    phases.data([&] { log_.push_back("data"); });
    phases.forward([&] { log_.push_back(engine::nn::current_parameter_gate() ? "forward, gated" : "forward"); });
    for (int group = 0; group < 2; ++group) {
      phases.backward([&] { log_.push_back("backward " + std::to_string(group)); }, group);
      phases.optimizer([&] { log_.push_back("workload step " + std::to_string(group)); });
    }
    return {1.0, 1, 0};
  }
  bool take_parameter_service(engine::optim::ParameterService& service) override {
    log_.push_back("take_parameter_service");
    if (takes_service) taken = &service;
    return takes_service;
  }

 private:
  Log& log_;
  engine::nn::Module model_;
};

// One iteration's log through the phases, as the header documents it.
Log iteration(bool workload_steps) {
  Log l = {"forward_gate", "data", "begin_forward", "forward, gated"};
  for (int g = 0; g < 2; ++g) {
    l.push_back("begin_backward " + std::to_string(g));
    l.push_back("backward " + std::to_string(g));
    l.push_back("end_backward");
    l.push_back("begin_update");
    if (workload_steps) l.push_back("workload step " + std::to_string(g));
  }
  return l;
}

void append(Log& to, const Log& from) { to.insert(to.end(), from.begin(), from.end()); }

LoopOptions two_plus_one(engine::optim::GradientExchange& exchange) {
  LoopOptions o;
  o.warmup = 1;
  o.iterations = 2;
  o.exchange = &exchange;
  return o;
}

}  // namespace

TEST(TrainingStrategy, LoopCallsTheHooksInTheDocumentedOrder) {
  Log log;
  RecordingExchange exchange(log);
  ScriptedWorkload w(log);
  const LoopResult r = run_training(w, two_plus_one(exchange));
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 3u);
  Log want;
  for (int i = 0; i < 3; ++i) {
    want.push_back("agree_stop -");
    append(want, iteration(true));
  }
  want.push_back("flush");  // the last iteration's updates, inside its span
  want.push_back("flush");  // after the loop
  EXPECT_EQ(log, want);
}

TEST(TrainingStrategy, WorkloadStepSkippedWhenTheExchangeUpdates) {
  Log log;
  RecordingExchange exchange(log);
  exchange.runs_workload_step = false;  // cross-barrier's split step, or the servers
  ScriptedWorkload w(log);
  LoopOptions o = two_plus_one(exchange);
  o.warmup = 0;
  o.iterations = 1;
  ASSERT_FALSE(run_training(w, o).failed);
  Log want = {"agree_stop -"};
  append(want, iteration(false));
  append(want, {"flush", "flush"});
  EXPECT_EQ(log, want);
}

TEST(TrainingStrategy, StopIsAgreedBeforeEachIteration) {
  Log log;
  RecordingExchange exchange(log);
  exchange.stop_at_call = 1;  // another rank was asked to stop during the first iteration
  ScriptedWorkload w(log);
  const LoopResult r = run_training(w, two_plus_one(exchange));
  EXPECT_TRUE(r.interrupted);
  ASSERT_EQ(r.iterations.size(), 1u);
  Log want = {"agree_stop -"};
  append(want, iteration(true));
  append(want, {"agree_stop -", "flush"});  // no last-iteration flush: the loop stopped early
  EXPECT_EQ(log, want);

  // This process's own stop flag goes to the agreement, which stops before any work.
  log.clear();
  const std::atomic<bool> asked{true};
  LoopOptions o = two_plus_one(exchange);
  o.stop = &asked;
  EXPECT_TRUE(run_training(w, o).interrupted);
  EXPECT_EQ(log, (Log{"agree_stop local", "flush"}));
}

TEST(TrainingStrategy, LearnersThatTakeTheServiceBypassThePhasesHooks) {
  Log log;
  RecordingExchange exchange(log);
  exchange.offers_service = true;
  ScriptedWorkload w(log);
  w.takes_service = true;
  LoopOptions o = two_plus_one(exchange);
  o.warmup = 0;
  o.iterations = 1;
  ASSERT_FALSE(run_training(w, o).failed);
  EXPECT_EQ(w.taken, &exchange.service);
  // The phases run as in one process (no gate, the workload's own step), but the stop flag and
  // the flushes still go through the exchange.
  const Log want = {
      "take_parameter_service", "agree_stop -", "data", "forward", "backward 0", "workload step 0", "backward 1",
      "workload step 1",        "flush",        "flush"};
  EXPECT_EQ(log, want);
}

TEST(TrainingStrategy, WorkloadThatDeclinesTheServiceKeepsTheHooks) {
  Log log;
  RecordingExchange exchange(log);
  exchange.offers_service = true;
  ScriptedWorkload w(log);
  LoopOptions o = two_plus_one(exchange);
  o.warmup = 0;
  o.iterations = 1;
  ASSERT_FALSE(run_training(w, o).failed);
  EXPECT_EQ(w.taken, nullptr);
  Log want = {"take_parameter_service", "agree_stop -"};
  append(want, iteration(true));
  append(want, {"flush", "flush"});
  EXPECT_EQ(log, want);
}

TEST(TrainingStrategy, FailedFlushFailsTheRunUnderTheExchangesName) {
  Log log;
  RecordingExchange exchange(log);
  exchange.flush_throws = true;
  ScriptedWorkload w(log);
  const LoopResult r = run_training(w, two_plus_one(exchange));
  EXPECT_TRUE(r.failed);
  // The last iteration's flush fails that iteration; the one after the loop keeps the first error.
  EXPECT_EQ(r.iterations.size(), 2u);
  EXPECT_EQ(r.error, "iteration 2: lost a rank");
  EXPECT_EQ(log.back(), "flush");

  // A loop stopped before its last iteration fails only at the flush after it.
  log.clear();
  exchange.stop_at_call = 0;
  const LoopResult stopped = run_training(w, two_plus_one(exchange));
  EXPECT_TRUE(stopped.failed);
  EXPECT_EQ(stopped.error, "recording: lost a rank");
}

TEST(TrainingStrategy, NoExchangeIsOneProcess) {
  Log log;
  ScriptedWorkload w(log);
  LoopOptions o;
  o.warmup = 0;
  o.iterations = 1;
  ASSERT_FALSE(run_training(w, o).failed);
  // No gate on the forward, the workload's own step, nothing offered to take.
  const Log want = {"data", "forward", "backward 0", "workload step 0", "backward 1", "workload step 1"};
  EXPECT_EQ(log, want);
}
