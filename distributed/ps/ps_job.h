#pragma once
// One rank's part in a parameter-server job: the communicators (duplicates of the world's: the
// workers' messages, the servers' answers, the workers among themselves), the key layout every
// rank plans alike (checked: a rank that built another model stops the job on every rank), the
// server shard this rank holds, if any (a thread beside the training of a co-located worker, or
// the whole of a dedicated server rank's work), and the worker side, if it is a worker.
#include <mpi.h>

#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "distributed/ps/key_layout.h"
#include "distributed/ps/ps_options.h"
#include "distributed/ps/server.h"
#include "distributed/ps/topology.h"
#include "distributed/ps/worker.h"
#include "engine/optim/optimizer_recipe.h"
#include "engine/tensor.h"

namespace ts::distributed::ps {

class PsJob {
 public:
  // Collective over `world`. `groups`: the workload's gradient groups; `recipes[g]`: group g's
  // optimizer. Throws DistError (every rank alike) when the ranks' models differ.
  PsJob(MPI_Comm world, const PsOptions& options, std::vector<std::vector<engine::Tensor>> groups,
        std::vector<engine::optim::OptimizerRecipe> recipes);
  ~PsJob();
  PsJob(const PsJob&) = delete;
  PsJob& operator=(const PsJob&) = delete;

  const Topology& topology() const { return topology_; }
  const KeyLayout& layout() const { return layout_; }
  bool is_worker() const { return worker_ != nullptr; }
  PsWorker* worker() { return worker_.get(); }
  const PsWorker* worker() const { return worker_.get(); }
  // The shard this rank holds (-1: none).
  int server_index() const { return server_index_; }

  // Starts this rank's server: on a thread of its own beside a worker's training (whose failure
  // ends the job: the workers would wait for it forever), or (a dedicated server rank) on the
  // calling thread, returning when every worker is done and throwing when it fails.
  void start_server();
  // The worker's finish (worker.h; rethrows its failure), then waits for this rank's server thread.
  void finish();

  // This rank's server's figures (empty before it has served, or without a server).
  std::vector<ServerStats> server_stats() const;
  StalenessCounts staleness() const;

 private:
  MPI_Comm to_servers_ = MPI_COMM_NULL, to_workers_ = MPI_COMM_NULL, workers_ = MPI_COMM_NULL;
  PsOptions options_;
  Topology topology_;
  KeyLayout layout_;
  int rank_ = 0;
  int server_index_ = -1;
  std::unique_ptr<ParameterServer> server_;
  std::thread server_thread_;
  bool served_ = false;
  std::unique_ptr<PsWorker> worker_;
};

}  // namespace ts::distributed::ps
