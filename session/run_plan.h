#pragma once
// The first stage of a run (docs/design.md, "How a run flows", 2): what the run will be, decided from the
// configuration and the rank's place alone, before anything is built, measured or written. A pure
// function: the same config and world give the same plan, so it is tested without ranks or a db.
#include <cstdint>
#include <string>
#include <vector>

#include "distributed/mpi_runtime.h"
#include "distributed/ps/topology.h"
#include "nlohmann/json.hpp"
#include "session/run_config.h"
#include "session/run_options.h"
#include "store/records.h"
#include "workloads/workload.h"

namespace ts::session {

struct RunPlan {
  int rank = 0, ranks = 1;
  bool distributed = false;            // more than one rank
  bool writes_db = true;               // rank 0 keeps the run's row; the others send it their records
  bool on_ps = false;                  // the ranks share through a parameter server
  distributed::ps::Topology topology;  // on_ps only
  bool trains = true;                  // false on a dedicated server rank, which only serves
  int workers = 1;                     // the ranks that train
  int threads = 1;
  // The config with its defaults resolved once (batch, threads, nproc = ranks): what is stored.
  RunConfig resolved;
  workloads::WorkloadConfig workload;  // batch resolved: no workload sees the 0 "preset's default"
  workloads::ThroughputUnits units;
  // The run row's fields; started_at and the writing process are stamped when the row begins
  // (session/run_record.h), and config_json gains the ranks' hosts once they are known.
  store::RunInfo info;
};

// `world`: this rank's place (null: a single process); `cores`: the host's online cores, shared
// by its ranks unless --threads says otherwise; `gpus`: the host's GPUs, over which the ranks of
// a `--device cuda` run spread (distributed/gpu_assignment.h; `cuda:N` pins every rank to GPU N).
// Throws std::runtime_error when the workload or preset is unknown or a parameter server's
// placement does not fit the ranks.
RunPlan plan_run(const RunConfig& config, const distributed::World* world, int64_t cores, int gpus = 0);

// What a resolved config (plan_run's `resolved`) adds to its options in the stored config
// (runs.config_json = stored_config(resolved, stored_facts(resolved)), session/run_options.h):
// the batch and threads used, the workload's units and preset table, a distributed run's topology.
StoredFacts stored_facts(const RunConfig& resolved);

// Every rank's host, in rank order, into the stored config of a distributed run.
void add_rank_hosts(RunPlan& plan, const std::vector<std::string>& hosts);

}  // namespace ts::session
