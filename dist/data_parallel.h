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
// Batch norm statistics are not synchronised: they stay per rank, as DDP's default.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dist/communicator.h"
#include "engine/tensor.h"

namespace ts::dist {

enum class BucketOrder { reverse_registration, arrival };
std::string_view to_string(BucketOrder order);

struct DataParallelOptions {
  double bucket_mb = 25.0;    // bucket capacity, MiB (PyTorch DDP's default 25)
  bool overlap = true;
  BucketOrder order = BucketOrder::arrival;
  bool priority = false;
  double partition_mb = 4.0;  // with priority: the partition and bucket size, MiB
};

// One bucket as built (for the run record and the tests).
struct BucketLayout {
  int group = 0;
  int index = 0;
  int64_t bytes = 0;
  int priority = 0;                       // lower goes first (priority mode)
  std::vector<std::string> parameters;    // names; a partitioned tensor appears in each of its buckets
};

class DataParallel {
 public:
  // `groups`: the parameters each backward phase produces (workloads::Workload::gradient_groups).
  // Checks with the other ranks that every rank built the same groups (DistError if not). CPU
  // tensors only for now (DistError for others).
  DataParallel(Communicator& comm, std::vector<std::vector<engine::Tensor>> groups, const DataParallelOptions& options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Rank 0's parameters to every rank (before the first iteration).
  void broadcast_parameters();
  // Arms group `group`: its gradients' hooks start the buckets' all-reduces.
  void begin_backward(int group);
  // Starts whatever has not started (all of it with overlap off), waits until every bucket of
  // the group is averaged (a `wait` event), and rethrows a failure of the communication thread.
  void end_backward();
  // True when `local` is true on any rank (an all-reduce of one flag): the ranks stop together.
  bool any_rank(bool local, std::string_view label);

  std::vector<BucketLayout> buckets() const;
  // Parameters that had no gradient at the end of a backward of their group (averaged as
  // zeros on the other ranks' side, left without a gradient here), summed over all backwards.
  int64_t parameters_without_gradient() const;
  Communicator& communicator() { return comm_; }
  const DataParallelOptions& options() const { return options_; }

 private:
  struct State;
  // Packs group `group`'s gradients into buckets, parameters in `order` (slot indices).
  void build_buckets(int group, const std::vector<int>& order);
  void run_communication_thread();
  Communicator& comm_;
  DataParallelOptions options_;
  std::shared_ptr<State> state_;   // the hooks hold it weakly: a model may outlive this object
};

}  // namespace ts::dist
