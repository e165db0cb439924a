#pragma once
// One server shard of the parameter server: it holds its keys' values and optimizer state,
// applies the workers' gradients with the workload's own optimizer (one per key, built from the
// group's recipe), and answers reads as the consistency mode allows (ps_options.h). Two
// threads: one takes messages off the network into a queue, the other serves them in arrival
// order, so that the queue's length says how far the server is behind. Its work is traced as
// `comm` events ("ps aggregate", "ps update", "ps reply") on the serving thread.
#include <mpi.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "distributed/ps/key_layout.h"
#include "distributed/ps/ps_options.h"
#include "distributed/ps/topology.h"
#include "distributed/ps/wire.h"
#include "engine/optim/optimizer_recipe.h"

namespace ts::distributed::ps {

struct ServerStats {
  int server = 0, rank = 0;
  int64_t keys = 0, bytes_held = 0;
  int64_t bytes_in = 0, bytes_out = 0, pushes = 0, pulls = 0, updates = 0;
  int64_t busy_ns = 0;  // serving messages (not waiting for them)
  int64_t queue_max = 0;
  double queue_mean = 0;
};

// (worker, worker's iteration, clock gap?, staleness) -> how many.
using StalenessCounts = std::map<std::tuple<int, int, bool, int64_t>, int64_t>;

class ParameterServer {
 public:
  // `recipes[g]`: how group g's keys are updated. `to_servers` carries the workers' messages,
  // `to_workers` this server's answers (ranks as in the job's world communicator).
  ParameterServer(int server, int rank, const KeyLayout& layout, std::vector<engine::optim::OptimizerRecipe> recipes,
                  const PsOptions& options, const Topology& topology, MPI_Comm to_servers, MPI_Comm to_workers);
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  // Serves until every worker has said it is done. Throws DistError on a protocol violation
  // or a failed MPI call.
  void serve();

  const ServerStats& stats() const { return stats_; }
  const StalenessCounts& staleness() const { return staleness_; }

 private:
  struct KeyState;
  struct Inbox;
  void handle(int source, Message& m);
  void apply(KeyState& k, const Message& m);
  void reply(KeyState& k, int worker, int64_t clock, int32_t iteration, int32_t final_read = 0);
  void answer_waiting(KeyState& k);
  bool may_answer(const KeyState& k, int64_t clock, int64_t* gap) const;

  int server_;
  const KeyLayout& layout_;
  std::vector<engine::optim::OptimizerRecipe> recipes_;
  PsOptions options_;
  Topology topology_;
  MPI_Comm to_servers_, to_workers_;
  std::vector<std::unique_ptr<KeyState>> keys_;  // by key id; null for other servers' keys
  int done_ = 0;
  std::vector<bool> done_workers_;  // a done worker listens no more: nothing is sent to it
  ServerStats stats_;
  StalenessCounts staleness_;
};

}  // namespace ts::distributed::ps
