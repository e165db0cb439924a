#include "workloads/training_loop.h"

#include <exception>

#include "engine/context.h"
#include "memprof/ledger.h"
#include "profiler/clock.h"
#include "profiler/tracer.h"

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

}  // namespace

LoopResult run_training(Workload& w, const LoopOptions& options) {
  LoopResult result;
  auto& tracer = profiler::Tracer::global();
  auto& ledger = memprof::Ledger::global();
  const PhaseIds& ids = phase_ids();
  const int64_t total = options.warmup + options.iterations;
  w.model().train(true);
  for (int64_t i = 0; i < total; ++i) {
    if (options.stop && options.stop->load()) {
      result.interrupted = true;
      break;
    }
    IterationResult it;
    it.index = i;
    it.warmup = i < options.warmup;
    it.learning_rate = w.learning_rate();
    tracer.set_iteration(static_cast<int32_t>(i));
    ledger.set_iteration(static_cast<int32_t>(i));
    try {
      it.start_ns = profiler::now_ns();
      profiler::Range iteration(ids.iteration, profiler::EventKind::iteration);
      Batch batch;
      {
        profiler::Range r(ids.data, profiler::EventKind::phase);
        batch = w.next_batch();
      }
      engine::Tensor loss;
      {
        profiler::Range r(ids.forward, profiler::EventKind::phase);
        engine::PassScope pass(profiler::Pass::forward);
        engine::CategoryScope category(memprof::Category::activations);
        loss = w.forward_loss(batch);
      }
      {
        profiler::Range r(ids.backward, profiler::EventKind::phase);
        loss.backward();
      }
      {
        profiler::Range r(ids.optimizer, profiler::EventKind::phase);
        engine::CategoryScope category(memprof::Category::optimizer_state);
        w.optimizer_step();
        w.zero_grad();
      }
      it.loss = static_cast<double>(loss.item());
      it.samples = batch.samples;
    } catch (const std::exception& e) {
      result.failed = true;
      result.error = "iteration " + std::to_string(i) + ": " + e.what();
      break;
    }
    it.end_ns = profiler::now_ns();
    result.iterations.push_back(it);
    if (options.on_iteration) options.on_iteration(it);
  }
  return result;
}

}  // namespace ts::workloads
