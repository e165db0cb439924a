#pragma once
// What a run is asked to do: the workload and its sizes, where the results go, how it is
// measured and, for a distributed run, the data-parallel knobs. Parsed and validated by the cli.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/data_parallel.h"
#include "distributed/gpu_assignment.h"
#include "distributed/ps/ps_options.h"

namespace ts::session {

struct RunConfig {
  std::string workload;
  // Whose training: trainscope's engine, or the workload's PyTorch reference under PyTorch's
  // profiler, imported (cli/pytorch_reference.h).
  std::string framework = "trainscope";
  std::string preset = "tiny";
  std::string device = "cpu";
  std::string data = "synthetic";
  // One process training on the data of rank R of N ("R/N", empty: all of it): a one-rank run that
  // reads what that rank of an N-rank job would (its batches), to project the job from.
  std::string shard;
  std::optional<int64_t> batch;     // unset: the preset's default
  std::optional<int64_t> learners;  // actor-learner threads (a3c); unset: the preset's
  int64_t iterations = 20;
  int64_t warmup = 3;
  int64_t threads = 0;  // 0: all cores
  uint64_t seed = 1;
  int64_t eval_batches = 2;
  // Evaluations during training (session/quality_curve.h): after every `eval_every` timed
  // iterations (0: only at the end), outside the timed spans; the first to reach
  // `quality_target` (the workload's metric, in its direction) gives the run's time to quality.
  int64_t eval_every = 0;
  std::optional<double> quality_target;
  bool trace = true;
  // After training, measure the machine's SGEMM peak and copy bandwidth (engine/peaks.h, on one
  // thread and on the run's) and store them beside the step's roofline (docs/formulas.md).
  bool roofline = false;
  bool json = false;
  std::filesystem::path db = "results/trainscope.db";
  std::chrono::milliseconds flush_interval{2000};  // how often the run is written while it runs
  std::chrono::milliseconds lock_wait{60000};      // how long the final write waits for a locked db
  // How long a rank that answers but does not arrive may keep the others waiting before the job
  // stops (distributed/stall_watch.h); 0: from the run's iterations.
  std::chrono::milliseconds stall_timeout{0};
  std::string command_line;
  // Which suite run this is (empty name: not from a suite); stored in the config as "suite".
  struct SuiteTag {
    std::string name;
    int64_t entry = 0, repeat = 0;  // 1-based: the [[run]] table and the repeat of its batch
  } suite;

  // Distribution (docs/distributed.md). nproc: the ranks the launcher starts (a rank learns its
  // place from MPI); the data-parallel knobs are stored in the run's config.
  int64_t nproc = 1;                                     // with hosts, 0: one rank per slot
  std::string hosts;                                     // --hosts h1:2,h2:2 (the launcher's)
  std::filesystem::path hostfile;                        // --hostfile (the launcher's)
  std::vector<std::pair<std::string, std::string>> mca;  // --mca NAME=VALUE, passed to mpirun
  // How the ranks share what they learn: all-reduce data parallelism (distributed/data_parallel.h) or
  // a parameter server (distributed/ps/); the knobs of the one not chosen are ignored.
  enum class Strategy { allreduce, ps } strategy = Strategy::allreduce;
  distributed::DataParallelOptions data_parallel;
  // A GPU model's gradients with all-reduce: NCCL where each rank has a GPU of its own, else
  // through the host (distributed/gpu_assignment.h); nccl or host forces one.
  distributed::GpuGradients gpu_gradients = distributed::GpuGradients::automatic;
  distributed::ps::PsOptions ps;
};
// CPU cores online on this machine (at least 1): a rank's default threads are its share of them.
int64_t online_cores();

}  // namespace ts::session
