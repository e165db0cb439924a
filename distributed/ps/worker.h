#pragma once
// A worker's side of the parameter server: it pushes each gradient to the server holding its
// keys as soon as backward has produced it (overlapped with the rest of backward; groups whose
// step clips by the global norm push after backward, clipped), drops the gradients, and
// installs the values the servers send back into the model just before the layer that reads
// them runs (a ParameterGate), so that the pulls overlap with the next forward. What a layer
// waits for depends on the mode (ps_options.h): the value answering its last push (sync, async,
// bounded), or (eager) the newest that has arrived as long as it answers the push before that.
// Two threads: one sends (in priority order when asked: the front layers' keys first), one
// receives.
// A workload whose learners update asynchronously from threads of their own (a3c) does not go
// through the phases' hooks and gate: it reads and pushes through the ParameterService side
// (engine/optim/parameter_service.h), from any of its threads. The training loop drives the
// worker as its GradientExchange (engine/optim/gradient_exchange.h).
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "distributed/ps/key_layout.h"
#include "distributed/ps/ps_options.h"
#include "distributed/ps/topology.h"
#include "engine/nn/module.h"
#include "engine/nn/parameter_gate.h"
#include "engine/optim/gradient_exchange.h"
#include "engine/optim/parameter_service.h"
#include "engine/tensor.h"

namespace ts::distributed::ps {

class PsWorker final : public engine::nn::ParameterGate,
                       public engine::optim::ParameterService,
                       public engine::optim::GradientExchange {
 public:
  // `groups`: the workload's gradient groups (the tensors the layout was planned from);
  // `clip_norms[g]`: group g's global-norm clipping before its push (0: none). `workers` is a
  // communicator of the workers only (the stop flag in sync mode).
  PsWorker(int worker, const KeyLayout& layout, std::vector<std::vector<engine::Tensor>> groups,
           std::vector<double> clip_norms, const PsOptions& options, const Topology& topology, MPI_Comm to_servers,
           MPI_Comm to_workers, MPI_Comm workers);
  ~PsWorker() override;
  PsWorker(const PsWorker&) = delete;
  PsWorker& operator=(const PsWorker&) = delete;

  // Worker 0's values become the servers' first; every worker then starts from them.
  void initialize();
  // Before each forward phase: installs the parameters read outside their own layer's gate.
  void begin_forward() override;
  void before_forward(const engine::nn::Module& module) override;
  // Arms group `group`'s gradient hooks; first waits until the last step's pushes are sent
  // (a `push wait`), so that at most one step of gradients is in flight.
  void begin_backward(int group) override;
  // Pushes what the hooks did not (parameters without a gradient, clipped groups) and drops
  // the group's gradients: the servers run the optimizer.
  void end_backward() override;
  // Whether any worker was asked to stop (sync: all of them decide together; otherwise each
  // worker for itself, and the servers stop waiting for a worker that is done).
  bool stop_requested(bool local);

  // GradientExchange, the loop's hooks beside the ones above: the stop flag is stop_requested;
  // the forward's gate is this worker; the servers run the optimizer (the workload's step never
  // does); nothing to flush (the updates are the servers'); the service is this worker.
  bool agree_stop(bool local) override { return stop_requested(local); }
  engine::nn::ParameterGate* forward_gate() override { return this; }
  bool begin_update() override { return false; }
  void flush() override {}
  engine::optim::ParameterService* parameter_service() override { return this; }
  std::string_view name() const override { return "parameter server"; }
  // The learners' side (parameter_service.h): the newest values that have arrived, and pushes
  // stamped with the versions they were computed on. At most two updates of a group wait to
  // be sent; a third push waits (a `push wait`) rather than let memory grow with a slow link.
  Versions read(int group, const std::vector<engine::Tensor>& into) override;
  void push(int group, const std::vector<engine::Tensor>& gradients, const Versions& versions) override;
  // Installs every key's newest value, first waiting for the answers to this worker's last
  // pushes: the model as this worker's servers hold it, for an evaluation between steps.
  void refresh_model();
  // Installs the newest values (waiting for the last answers), waits for every worker, reads the
  // servers' final values, says done to every server and waits for them to acknowledge.
  // Rethrows a failure of the network threads. Idempotent; every worker must call it.
  void finish();

  const KeyLayout& layout() const;
  int64_t pushes() const;
  int64_t bytes_pushed() const;

 private:
  struct State;
  // The network threads hold the state themselves: a worker destroyed without finish() (a
  // failing job, which MPI's abort ends) leaves them nothing dangling.
  static void send_thread(const std::shared_ptr<State>& st);
  static void receive_thread(const std::shared_ptr<State>& st);
  void push_tensor(int group, int tensor, bool has_gradient);
  // Installs `key`'s newest value; with `wait`, first waits for the answer to its last push
  // (eager mode: the one before, unless `even_eager`). A key never installed is always waited for.
  void install(int key, bool wait, bool even_eager = false);
  std::shared_ptr<State> state_;  // the gradient hooks hold it weakly
};

}  // namespace ts::distributed::ps
