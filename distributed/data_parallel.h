#pragma once
// Data parallelism with all-reduce, as PyTorch DDP does it and as the communication-scheduling
// papers vary it. Every rank holds the whole model; after each backward the ranks' gradients
// are averaged. Gradients are packed into buckets (--bucket-mb); a bucket's all-reduce starts on
// a communication thread as soon as the engine's grad-ready hook has fired for every gradient
// in it, overlapped with the rest of backward; end_backward() waits for what is left (the
// "gradient wait" the breakdown reports). Knobs:
// - overlap off: all-reduce only after backward (the baseline overlap is measured against);
// - bucket order: reverse registration order (backward reaches the last layers first), or
//   rebuilt after the first backward from rank 0's arrival order (DDP's default);
// - priority (ByteScheduler, P3): tensors cut into partitions of --partition-mb and buckets of
//   that size; when several are ready the front-most layer's goes first. Ranks agree on which
//   by a small all-reduce of their ready sets (collectives must match across ranks).
// - cross-barrier (with priority, ByteScheduler's name): backward's end no longer waits for the
//   buckets; the optimizer step is cut per parameter (engine/optim/split_step.h) and the next
//   forward, layer by layer (engine/nn/parameter_gate.h), waits only for its own parameters'
//   buckets and applies their update itself (the communication thread only communicates). The
//   front layers' buckets go first, so the next forward starts while the back layers' are
//   still in flight; what it does not reach is updated when the next backward begins.
// On a GPU (docs/distributed.md, "GPU ranks"): the buckets live in the GPU's memory when the
// gradients' communicator is NCCL, else in pinned host memory (ranks that share a GPU, which NCCL
// refuses); either way a side stream (engine/side_stream.h) copies the gradients in once the
// compute queue has reached the bucket's ready marker (recorded by the grad-ready hook, so the
// backward never waits on the host), the collective runs, the means are copied back, and the
// optimizer's kernels wait on the bucket's done marker.
// Batch norm statistics are not synchronised: they stay per rank, as DDP's default.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/communicator.h"
#include "engine/nn/parameter_gate.h"
#include "engine/optim/gradient_exchange.h"
#include "engine/optim/split_step.h"
#include "engine/side_stream.h"
#include "engine/tensor.h"

namespace ts::distributed {

enum class BucketOrder { reverse_registration, arrival };
std::string_view to_string(BucketOrder order);

struct DataParallelOptions {
  double bucket_mb = 25.0;  // bucket capacity, MiB (PyTorch DDP's default 25)
  bool overlap = true;
  BucketOrder order = BucketOrder::arrival;
  bool priority = false;
  double partition_mb = 4.0;  // with priority: the partition and bucket size, MiB
  bool cross_barrier = true;  // with priority: updates per parameter when the workload allows
};

// One bucket as built (for the run record and the tests).
struct BucketLayout {
  int group = 0;
  int index = 0;
  int64_t bytes = 0;
  int priority = 0;                     // lower goes first (priority mode)
  std::vector<std::string> parameters;  // names; a partitioned tensor appears in each of its buckets
};

// The training loop drives it as its GradientExchange (engine/optim/gradient_exchange.h).
class DataParallel final : public engine::nn::ParameterGate, public engine::optim::GradientExchange {
 public:
  // `groups`: the parameters each backward phase produces (workloads::Workload::gradient_groups).
  // `data` averages the gradients (on the communication thread); `control` carries what the
  // training thread asks while that thread may be busy (the model check, any_rank, the bucket
  // order): two communicators, so that their calls never interleave on one. Checks with the
  // other ranks that every rank built the same groups (DistError if not). The model lives on one
  // device: the CPU, or one GPU, whose gradients are averaged in GPU buckets when `data` takes
  // device memory (NCCL) or else copied into host buckets, averaged by MPI and copied back (the
  // host-staged path: ranks that share a GPU, where NCCL refuses "Duplicate GPU"). `stream`: the
  // side stream the copies run on (null: made for the model's device; a test passes a CPU one
  // that watches the calls).
  DataParallel(Communicator& data, Communicator& control, std::vector<std::vector<engine::Tensor>> groups,
               const DataParallelOptions& options, std::unique_ptr<engine::SideStream> stream = nullptr);
  ~DataParallel() override;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Rank 0's parameters to every rank (before the first iteration).
  void broadcast_parameters();
  // Arms group `group`: its gradients' hooks start the buckets' all-reduces.
  void begin_backward(int group) override;
  // Starts whatever has not started (all of it with overlap off), waits until every bucket of
  // the group is averaged (a `wait` event), and rethrows a failure of the communication thread.
  // With cross-barrier it returns at once: the waits move to the next forward's layers.
  void end_backward() override;

  // Cross-barrier: takes the workload's split optimizer step. Returns "" when taken, or why
  // not (then the step runs as before, after end_backward). Before the first backward.
  std::string take_split_step(engine::optim::SplitStep step);
  bool cross_barrier() const;
  // Cross-barrier, in the optimizer phase after end_backward: fixes the step and lets the
  // communication thread update each parameter as its gradient is averaged. Fails the run
  // (DistError) if the forward read a parameter before its gate (the update would have raced).
  void begin_updates();
  // Waits until every update of the last step is applied (before evaluation, at the end of the
  // last iteration); rethrows a failure of the communication thread. A no-op without pending work.
  void flush() override;
  // ParameterGate: the forward of `module` waits for its own parameters' updates.
  void before_forward(const engine::nn::Module& module) override;
  // True when `local` is true on any rank (an all-reduce of one flag): the ranks stop together.
  bool any_rank(bool local, std::string_view label);

  // GradientExchange, the loop's hooks. The stop flag: any_rank before the first iteration,
  // then an all-reduce started before each iteration and finished before the next, so that no
  // iteration waits on it (a stop asked during iteration i ends the loop after i + 1, on every
  // rank alike); flush finishes the last one. The forward's gate: this one
  // with cross-barrier, else none. The update: begin_updates with cross-barrier (the workload's
  // step does not run), else the workload's step.
  bool agree_stop(bool local) override;
  engine::nn::ParameterGate* forward_gate() override;
  void begin_forward() override {}
  bool begin_update() override;
  engine::optim::ParameterService* parameter_service() override { return nullptr; }
  std::string_view name() const override { return "data parallelism"; }

  std::vector<BucketLayout> buckets() const;
  // Whether a GPU model's gradients go through host buckets (MPI) ...
  bool staged_through_host() const;
  // ... or are averaged in buckets in the GPU's memory (NCCL).
  bool averages_on_device() const;
  // Parameters that had no gradient at the end of a backward of their group (averaged as
  // zeros on the other ranks' side, left without a gradient here), summed over all backwards.
  int64_t parameters_without_gradient() const;
  Communicator& communicator() { return comm_; }
  Communicator& control() { return control_; }
  const DataParallelOptions& options() const { return options_; }

 private:
  struct State;
  // Packs group `group`'s gradients into buckets, parameters in `order` (slot indices).
  void build_buckets(int group, const std::vector<int>& order);
  void run_communication_thread();
  // Ends the armed pass after its work is done (under the lock): disarms, counts, rethrows.
  void close_pass(std::unique_lock<std::mutex>& lock);
  // Cross-barrier (under the lock, on the training thread): waits until the pass's buckets are
  // averaged, applies the updates the forward did not reach (`apply`), closes the pass.
  void finish_pending_step(std::unique_lock<std::mutex>& lock, bool apply);
  // Cross-barrier: the split step's update of group 0's slot `slot`, once per step.
  void apply_update(int slot);
  Communicator& comm_;
  Communicator& control_;
  DataParallelOptions options_;
  // cross_barrier(), for the loop's hooks without the lock: set once, by take_split_step, on
  // the training thread before the first backward.
  bool split_taken_ = false;
  // The stop flag, exchanged an iteration behind (agree_stop): this rank's answer on its way.
  int64_t stop_flag_ = 0;
  bool stop_asked_once_ = false;
  std::shared_ptr<State> state_;  // the hooks hold it weakly: a model may outlive this object
};

}  // namespace ts::distributed
