#include "distributed/ps/ps_job.h"

#include <cstdio>
#include <functional>
#include <string>

#include "distributed/error.h"
#include "distributed/mpi_check.h"
#include "distributed/mpi_runtime.h"
#include "vocabulary/bucket_plan.h"

namespace ts::distributed::ps {

namespace {

// The layout's inputs folded into one number: equal on every rank that built the same model.
int64_t signature(const std::vector<std::vector<TensorSpec>>& specs) {
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const auto& g : specs) {
    mix(g.size());
    for (const auto& t : g) {
      mix(static_cast<uint64_t>(t.numel));
      mix(std::hash<std::string>{}(t.name));
      mix(std::hash<std::string>{}(t.layout));
    }
  }
  return static_cast<int64_t>(h >> 1);
}

}  // namespace

PsJob::PsJob(MPI_Comm world, const PsOptions& options, std::vector<std::vector<engine::Tensor>> groups,
             std::vector<engine::optim::OptimizerRecipe> recipes)
    : options_(options) {
  int size = 1;
  TS_MPI_CHECK(MPI_Comm_rank(world, &rank_));
  TS_MPI_CHECK(MPI_Comm_size(world, &size));
  try {
    topology_ = Topology::of(size, options);
  } catch (const std::invalid_argument& e) {
    throw DistError(std::string("parameter server: ") + e.what());
  }
  TS_MPI_CHECK(MPI_Comm_dup(world, &to_servers_));
  TS_MPI_CHECK(MPI_Comm_dup(world, &to_workers_));
  const bool worker = topology_.is_worker(rank_);
  TS_MPI_CHECK(MPI_Comm_split(world, worker ? 0 : MPI_UNDEFINED, rank_, &workers_));

  std::vector<std::vector<TensorSpec>> specs(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& p : groups[g]) specs[g].push_back({p.name(), p.storage_numel(), p.layout().str()});
  }
  // Every rank the same model, or none goes on (the message on every rank).
  int64_t mine[2] = {signature(specs), -signature(specs)};
  int64_t all[2] = {0, 0};
  TS_MPI_CHECK(MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_MAX, world));
  if (all[0] != mine[0] || -all[1] != mine[0]) {
    throw DistError("parameter server: the ranks built different models (their parameters' names, sizes or layouts "
                    "differ; TS_PACKED_WEIGHTS=0 on every rank keeps weights plain)");
  }
  if (recipes.size() != groups.size()) {
    throw DistError("parameter server: the workload gives " + std::to_string(recipes.size()) +
                    " optimizer recipes for " + std::to_string(groups.size()) + " gradient groups");
  }
  const auto chunk = vocabulary::mib_to_floats(options.chunk_mb);
  layout_ = plan_keys(specs, topology_.servers, chunk);

  server_index_ = topology_.server_of(rank_);
  if (server_index_ >= 0) {
    server_ = std::make_unique<ParameterServer>(server_index_, rank_, layout_, recipes, options, topology_, to_servers_,
                                                to_workers_);
  }
  if (worker) {
    std::vector<double> clip;
    for (const auto& r : recipes) clip.push_back(r.max_grad_norm);
    worker_ = std::make_unique<PsWorker>(rank_, layout_, std::move(groups), std::move(clip), options, topology_,
                                         to_servers_, to_workers_, workers_);
  }
}

PsJob::~PsJob() {
  if (server_thread_.joinable()) server_thread_.detach();  // a failed job: MPI's abort ends it
  worker_.reset();
  for (MPI_Comm* c : {&to_servers_, &to_workers_, &workers_}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

void PsJob::start_server() {
  if (!server_ || served_) return;
  served_ = true;
  if (!worker_) {
    server_->serve();
    return;
  }
  server_thread_ = std::thread([this] {
    try {
      server_->serve();
    } catch (const std::exception& e) {
      // Every worker waits for this server's answers: none can go on without it. Say why and
      // end the job (mpirun then stops every rank; the run is marked failed).
      std::fprintf(stderr, "\ntrainscope: parameter server %d (rank %d) failed: %s\n", server_index_, rank_, e.what());
      std::fflush(stderr);
      MpiRuntime::abort_job(1);
    }
  });
}

void PsJob::finish() {
  std::exception_ptr failure;
  if (worker_) {
    try {
      worker_->finish();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  if (!failure && server_thread_.joinable()) server_thread_.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<ServerStats> PsJob::server_stats() const {
  if (!server_ || !served_) return {};
  return {server_->stats()};
}

StalenessCounts PsJob::staleness() const { return server_ ? server_->staleness() : StalenessCounts{}; }

}  // namespace ts::distributed::ps
