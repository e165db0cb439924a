#include "workloads/training_loop.h"

#include <atomic>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/autotune.h"
#include "engine/context.h"
#include "engine/nn/parameter_gate.h"
#include "memprof/ledger.h"
#include "profiler/tracer.h"
#include "vocabulary/clock.h"
#include "workloads/device_iteration_timer.h"
#include "workloads/gpu_metric_names.h"

namespace ts::workloads {

namespace {

struct PhaseIds {
  profiler::StringId iteration, data, forward, backward, optimizer;
};

const PhaseIds& phase_ids() {
  static const PhaseIds ids = [] {
    auto& t = profiler::Tracer::global();
    return PhaseIds{t.intern("iteration"), t.intern("data"), t.intern("forward"), t.intern("backward"),
                    t.intern("optimizer")};
  }();
  return ids;
}

// The loop's gradient readiness (GradientTensor): which group's backward runs now (-1: none), read
// by the parameters' hooks. Shared with them: a model may outlive its loop, whose hooks then stay
// idle (a later loop over the same model arms hooks of its own).
struct GradientWatch {
  std::atomic<int> active_group{-1};
};

// Arms a hook on every parameter of the workload's gradient groups that records a "gradient ready"
// marker when its gradient is final in a backward of its own group (another group's backward may
// reach it too: wgan's generator step runs through the critic), and lists them in `result`.
std::shared_ptr<GradientWatch> watch_gradients(Workload& w, LoopResult& result) {
  auto watch = std::make_shared<GradientWatch>();
  auto& tracer = profiler::Tracer::global();
  static const profiler::StringId ready_name = tracer.intern("gradient ready");
  const auto groups = w.gradient_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t s = 0; s < groups[g].size(); ++s) {
      engine::Tensor p = groups[g][s];
      result.gradients.push_back({static_cast<int>(g), static_cast<int>(s), p.name(), p.nbytes()});
      const profiler::StringId layer = tracer.intern(p.name());
      std::weak_ptr<GradientWatch> weak = watch;
      p.add_grad_ready_hook([weak, group = static_cast<int>(g), layer](engine::Tensor&) {
        const auto w = weak.lock();
        auto& t = profiler::Tracer::global();
        if (!w || w->active_group.load(std::memory_order_relaxed) != group || !t.enabled()) return;
        const int64_t now = vocabulary::now_ns();
        t.record(profiler::Event{now, now, ready_name, layer, profiler::EventKind::marker, profiler::Pass::backward});
      });
    }
  }
  return watch;
}

// `device_time` (a GPU's) times each phase run on the thread that made these phases, the loop's:
// a3c's learners run phases on their own threads, and several at once.
class LoopPhases final : public Phases {
 public:
  LoopPhases(engine::optim::GradientExchange& exchange, DeviceIterationTimer* device_time, GradientWatch& gradients)
      : exchange_(exchange),
        gradients_(gradients),
        gate_(exchange.forward_gate()),
        device_time_(device_time),
        loop_thread_(std::this_thread::get_id()) {}
  void data(const std::function<void()>& f) override {
    profiler::Range r(phase_ids().data, profiler::EventKind::phase);
    engine::CategoryScope category(vocabulary::Category::inputs);
    on_device(LoopPhase::data, f);
  }
  void forward(const std::function<void()>& f) override {
    profiler::Range r(phase_ids().forward, profiler::EventKind::phase);
    engine::PassScope pass(profiler::Pass::forward);
    engine::CategoryScope category(vocabulary::Category::activations);
    on_device(LoopPhase::forward, [&] {
      // Cross-barrier, or a parameter server: each layer waits for its own parameters' update,
      // not for the whole step.
      exchange_.begin_forward();
      engine::nn::ParameterGateScope gate(gate_);
      f();
    });
  }
  void backward(const std::function<void()>& f, int group) override {
    profiler::Range r(phase_ids().backward, profiler::EventKind::phase);
    gradients_.active_group.store(group, std::memory_order_relaxed);
    on_device(LoopPhase::backward, [&] {
      exchange_.begin_backward(group);
      f();
      exchange_.end_backward();  // all-reduce: what is left, and the wait; parameter server: the last pushes
    });
    gradients_.active_group.store(-1, std::memory_order_relaxed);
  }
  void optimizer(const std::function<void()>& f) override {
    profiler::Range r(phase_ids().optimizer, profiler::EventKind::phase);
    engine::CategoryScope category(vocabulary::Category::optimizer_state);
    on_device(LoopPhase::optimizer, [&] {
      // Not run where cross-barrier updates parameter by parameter (the split step does f's
      // work) or where the servers run the workload's optimizer on what was pushed.
      if (exchange_.begin_update()) f();
    });
  }

 private:
  // Runs `body` between the phase's device events. Not after a throw: the iteration has failed.
  template <class F>
  void on_device(LoopPhase phase, const F& body) {
    const bool timed = device_time_ && std::this_thread::get_id() == loop_thread_;
    if (timed) device_time_->begin_phase(phase);
    body();
    if (timed) device_time_->end_phase(phase);
  }

  engine::optim::GradientExchange& exchange_;
  GradientWatch& gradients_;
  engine::nn::ParameterGate* gate_;
  DeviceIterationTimer* device_time_;
  std::thread::id loop_thread_;
};

// What the loop's convolution plans were made by: the difference of the device's counts
// (engine/autotune.h) over the loop, as run metrics.
std::vector<Metric> conv_plan_metrics(const engine::ConvPlanStats& before, const engine::ConvPlanStats& after) {
  return {{kGpuConvPlansSearched, static_cast<double>(after.searched - before.searched), "plans"},
          {kGpuConvPlansHeuristic, static_cast<double>(after.heuristic - before.heuristic), "plans"},
          {kGpuConvSearchesTimed, static_cast<double>(after.searched_while_off - before.searched_while_off), "plans"}};
}

std::string no_hook(const char* hook) {
  return std::string("this workload runs its own step and has no ") + hook + " hook";
}

}  // namespace

StepResult Workload::step(Phases& phases) {
  Batch batch;
  engine::Tensor loss;
  phases.data([&] { batch = next_batch(); });
  phases.forward([&] { loss = forward_loss(batch); });
  phases.backward([&] { loss.backward(); });
  phases.optimizer([&] {
    optimizer_step();
    zero_grad();
  });
  return {static_cast<double>(loss.item()), batch.samples};
}

Batch Workload::next_batch() { throw std::logic_error(no_hook("next_batch")); }
engine::Tensor Workload::forward_loss(const Batch&) { throw std::logic_error(no_hook("forward_loss")); }
void Workload::optimizer_step() { throw std::logic_error(no_hook("optimizer_step")); }
void Workload::zero_grad() { throw std::logic_error(no_hook("zero_grad")); }

LoopResult run_training(Workload& w, const LoopOptions& options) {
  LoopResult result;
  auto& tracer = profiler::Tracer::global();
  auto& ledger = memprof::Ledger::global();
  const PhaseIds& ids = phase_ids();
  const int64_t total = options.warmup + options.iterations;
  w.model().train(true);
  const std::shared_ptr<GradientWatch> gradients = watch_gradients(w, result);
  for (const auto& recipe : w.optimizer_recipes()) result.gradient_clip_norms.push_back(recipe.max_grad_norm);
  ledger.reset_peak();  // the training peak: what was allocated before (and freed) is not training's
  engine::optim::SingleProcess single;
  engine::optim::GradientExchange& exchange = options.exchange ? *options.exchange : single;
  // The exchange as the phases see it: none when the workload's learners read and push
  // themselves (through the parameter service).
  engine::optim::GradientExchange* phases_exchange = &exchange;
  if (engine::optim::ParameterService* service = exchange.parameter_service();
      service && w.take_parameter_service(*service)) {
    phases_exchange = &single;
  }
  // Where the device queues work (a GPU): the iterations' device time, and what made their
  // convolution plans.
  std::unique_ptr<DeviceIterationTimer> device_time;
  engine::ConvPlanStats plans_before;
  try {
    device_time = DeviceIterationTimer::on(options.device);
    if (device_time) plans_before = engine::conv_plan_stats(options.device);
  } catch (const std::exception& e) {
    result.failed = true;
    result.error = std::string("device timing: ") + e.what();
  }
  // Set from the first timed iteration to the loop's end: a convolution shape first seen in a
  // timed iteration takes the library's heuristic plan rather than timing every candidate there.
  std::unique_ptr<engine::AutotuneScope> no_autotune;  // (std::optional: GCC 12 warns of a false maybe-uninitialized)
  for (int64_t i = 0; i < total && !result.failed; ++i) {
    const bool stop = exchange.agree_stop(options.stop && options.stop->load());  // distributed: all ranks, or none
    if (stop) {
      result.interrupted = true;
      break;
    }
    IterationResult it;
    it.index = i;
    it.warmup = i < options.warmup;
    it.learning_rate = w.learning_rate();
    tracer.set_iteration(static_cast<int32_t>(i));
    ledger.set_iteration(static_cast<int32_t>(i));
    if (!it.warmup && !no_autotune) no_autotune = std::make_unique<engine::AutotuneScope>(false);
    try {
      it.start_ns = vocabulary::now_ns();
      if (device_time) device_time->begin_iteration();
      {
        profiler::Range iteration(ids.iteration, profiler::EventKind::iteration);
        LoopPhases phases(*phases_exchange, device_time.get(), *gradients);
        const StepResult r = w.step(phases);
        // The last step's updates belong to its iteration (cross-barrier leaves them running).
        if (i + 1 == total) exchange.flush();
        // A GPU's ops return once queued: the iteration ends when the device has run them.
        if (device_time) device_time->end_iteration();
        it.loss = r.loss;
        it.samples = r.samples;
        it.tokens = r.tokens;
        it.metrics = w.iteration_metrics();
      }
      it.end_ns = vocabulary::now_ns();
      if (device_time) device_time->report(it);
    } catch (const std::exception& e) {
      result.failed = true;
      result.error = "iteration " + std::to_string(i) + ": " + e.what();
      break;
    }
    try {
      if (options.on_iteration) options.on_iteration(it);
    } catch (const std::exception& e) {
      result.failed = true;
      result.error = "after iteration " + std::to_string(i) + ": " + e.what();
    }
    result.iterations.push_back(it);
    if (result.failed) break;
  }
  try {
    exchange.flush();  // an interrupted or failed loop's updates, before anything reads the model
  } catch (const std::exception& e) {
    if (!result.failed) {
      result.failed = true;
      result.error = std::string(exchange.name()) + ": " + e.what();
    }
  }
  no_autotune.reset();
  result.memory_peak = ledger.peak();
  // What is allocated next (evaluation, another loop's set-up) is no iteration of this one.
  ledger.set_iteration(-1);
  try {
    result.metrics = w.run_metrics();  // also after a failure: what was measured is kept
  } catch (const std::exception& e) {
    if (!result.failed) {
      result.failed = true;
      result.error = std::string("run metrics: ") + e.what();
    }
  }
  if (device_time) {
    try {
      for (auto& m : conv_plan_metrics(plans_before, engine::conv_plan_stats(options.device))) {
        result.metrics.push_back(std::move(m));
      }
    } catch (const std::exception& e) {
      if (!result.failed) {
        result.failed = true;
        result.error = std::string("convolution plan counts: ") + e.what();
      }
    }
  }
  return result;
}

Quality run_evaluation(Workload& w, int64_t batches) {
  profiler::Tracer::global().set_iteration(-1);
  memprof::Ledger::global().set_iteration(-1);
  engine::CategoryScope category(vocabulary::Category::activations);
  return w.evaluate(batches);
}

}  // namespace ts::workloads
