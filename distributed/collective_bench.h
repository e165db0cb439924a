#pragma once
// A collectives benchmark in the manner of nccl-tests: each collective at sizes from a minimum
// to a maximum number of bytes (times a factor each step), `warmup` untimed calls and then
// `iterations` timed ones per size, on float32 with sum. The time of a size is the mean per call,
// averaged over the ranks (nccl-tests' default, `-a 1`); algbw and busbw follow from it as
// comm_figures.h defines them. Every size is then checked once against known values (nccl-tests'
// `-c 1`): a wrong element is counted, never hidden. Every rank's time of every timed call is
// kept (samples_ns), for the percentiles, stragglers and spikes (reports/bench_spread.h).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "distributed/communicator.h"

namespace ts::distributed {

// Where the benchmark's buffers live: host memory for MPI, the GPU's for NCCL. Each call is
// complete when it returns (the zeros and the uploaded data are in place), whatever stream the
// communicator then runs on.
class BenchMemory {
 public:
  virtual ~BenchMemory() = default;
  virtual void* allocate(size_t bytes) = 0;  // zero-filled
  virtual void release(void* p) noexcept = 0;
  virtual void upload(void* to, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* from, size_t bytes) = 0;
};
std::unique_ptr<BenchMemory> host_memory();
#ifdef TS_HAVE_CUDA
std::unique_ptr<BenchMemory> cuda_memory(int device);  // distributed/bench_memory_cuda.cpp
#endif

struct CollectiveBenchOptions {
  std::vector<Collective> collectives = {Collective::all_reduce, Collective::broadcast, Collective::all_gather,
                                         Collective::reduce_scatter, Collective::barrier};
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{256} << 20;
  int64_t factor = 2;
  int iterations = 20;
  int warmup = 5;
  // The sweep's time limit on this rank's clock (--timeout): once passed on any rank, every rank
  // stops at the next size (BenchEnd::timed_out). A call that does not end is the stall watch's
  // (stall_watch.h, StallOptions::limit_at).
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Called on every rank before each timed call (`call`: 0..iterations-1): a test's way to hold a
  // rank up (TS_TEST_BENCH_STALL in the command). May be empty.
  std::function<void(Collective, int64_t bytes, int call)> before_timed_call;
  // After the timed calls, this many more with a busy thread beside them on every rank (0: none).
  int beside_calls = 3;
};

struct CollectiveBenchResult {
  Collective collective = Collective::barrier;
  int64_t bytes = 0;  // as CollectiveRecord::bytes: the whole buffer (all ranks' for gather/scatter)
  int64_t count = 0;  // float32 elements of one rank's call (all-gather: its send; reduce-scatter: its receive)
  int ranks = 0;
  int iterations = 0;
  double time_ns = 0;       // mean per call, averaged over the ranks
  int64_t min_time_ns = 0;  // the fastest single call on any rank
  int64_t max_time_ns = 0;  // the slowest single call on any rank
  // Beside the calls (CollectiveBenchOptions::beside_calls): the rate a busy thread kept while more
  // calls ran, as a share of its rate with none, averaged over the ranks, and those calls' mean
  // time; -1: not measured. What communication takes from compute on the same cores, and compute
  // from it (projection/).
  double beside_rate = -1, beside_ns = -1;
  double algbw_gbps = 0, busbw_gbps = 0;
  int64_t wrong = 0;  // elements of the check call that differed from the expected value, all ranks
  // Every rank's time of every timed call, on every rank: rank r's call i at r * iterations + i.
  std::vector<int64_t> samples_ns;
};

// How a sweep ended: every size measured, stopped (a rank's `stop` set), or past the deadline.
enum class BenchEnd { finished, stopped, timed_out };

// The sizes a sweep visits: min, min*factor, ... up to max (max included when it lies on the way).
std::vector<int64_t> sweep_sizes(int64_t min_bytes, int64_t max_bytes, int64_t factor);

// The sweep. Every rank calls it with the same options. `measured` carries the timed calls, on
// buffers from `memory`; `host` (MPI, the same ranks) lines the ranks up before each size and
// combines their times. `stop` (may be null) and the options' deadline are checked between
// sizes on every rank: when any rank's stop is set (or its deadline passed), every rank stops
// there and says so (a passed deadline wins). `on_result` gets each result, on every rank, as soon
// as it is known (rank 0 prints and stores them).
BenchEnd run_collective_bench(Communicator& measured, Communicator& host, BenchMemory& memory,
                              const CollectiveBenchOptions& options, const std::atomic<bool>* stop,
                              const std::function<void(const CollectiveBenchResult&)>& on_result);

}  // namespace ts::distributed
