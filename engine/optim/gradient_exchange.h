#pragma once
// How an iteration's gradients are shared with the other processes of a run: the training
// strategy as the training loop (workloads/training_loop.h) sees it. The engine owns the
// interface so that the workloads never depend on the distributed layer; the run session picks
// the implementation: one process (SingleProcess, below), all-reduce data parallelism
// (distributed/data_parallel.h) or a parameter server's worker (distributed/ps/worker.h).
//
// The loop calls the hooks on its own thread, in this order:
//   before each iteration:        agree_stop
//   each iteration's phases:      forward_gate (once, when its phases are made), then
//     each forward phase:         begin_forward, the forward (its layers pass forward_gate())
//     each backward phase:        begin_backward(group), the backward, end_backward
//     each optimizer phase:       begin_update (false: the workload's own step is skipped)
//   end of the last iteration:    flush (its updates belong to its span)
//   after the loop (any outcome): flush
// A workload that takes the parameter service (parameter_service(), Workload::take_parameter_service)
// pushes from its own threads: its phases then call no hook, only agree_stop and flush are called.
#include <string_view>

#include "engine/nn/parameter_gate.h"
#include "engine/optim/parameter_service.h"

namespace ts::engine::optim {

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  // Whether the loop stops before this iteration, given whether this process was asked to.
  // Distributed: decided with the other processes (a collective), so that they stop together.
  virtual bool agree_stop(bool local) = 0;
  // The gate the forward's layers pass before reading their own parameters (nullptr: none):
  // where updates may still be in flight when the next forward starts.
  virtual nn::ParameterGate* forward_gate() = 0;
  // Before each forward phase's work (installs what layers read outside their own gate).
  virtual void begin_forward() = 0;
  // Around one backward phase of gradient group `group` (Workload::gradient_groups): the
  // exchange starts as gradients become ready and end_backward waits for, or hands off, the rest.
  virtual void begin_backward(int group) = 0;
  virtual void end_backward() = 0;
  // The optimizer phase begins: true when the workload's own optimizer step is to run; false
  // when the exchange updates the parameters itself (from here on, or on the servers).
  virtual bool begin_update() = 0;
  // Waits until every update begun is applied to the model; rethrows the exchange's failure.
  virtual void flush() = 0;
  // The service a workload whose learners read and push from threads of their own takes
  // (nullptr: none to take).
  virtual ParameterService* parameter_service() = 0;
  // What a failure of the exchange is reported as ("data parallelism: ...").
  virtual std::string_view name() const = 0;
};

// One process: nothing to share, the workload's optimizer runs as written.
class SingleProcess final : public GradientExchange {
 public:
  bool agree_stop(bool local) override { return local; }
  nn::ParameterGate* forward_gate() override { return nullptr; }
  void begin_forward() override {}
  void begin_backward(int /*group*/) override {}
  void end_backward() override {}
  bool begin_update() override { return true; }
  void flush() override {}
  ParameterService* parameter_service() override { return nullptr; }
  std::string_view name() const override { return "single process"; }
};

}  // namespace ts::engine::optim
