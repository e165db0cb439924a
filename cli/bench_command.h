#pragma once
// `trainscope bench collectives`: the collectives benchmark (distributed/collective_bench.h) over N
// ranks started through mpirun, printed as nccl-tests prints it and stored as one run whose
// workload is `collectives` (its rows in the collective_bench table).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/run_config.h"
#include "cli/run_flags.h"
#include "nlohmann/json.hpp"
#include "reports/bench_spread.h"
#include "store/records.h"

namespace ts::cli {

struct CollectivesBenchConfig {
  std::string backend = "mpi";           // mpi (host memory) | nccl (GPU memory, CUDA builds)
  std::vector<std::string> collectives;  // empty: all of them
  std::string min_bytes = "8", max_bytes = "256M";
  int64_t factor = 2;
  int64_t iterations = 20, warmup = 5;
  // Seconds the whole sweep may take on the ranks (from their start); 0: no limit.
  double timeout_s = 0;
  // Seconds of one TCP stream between rank 0's host and the next host's first rank, the link's
  // rate busbw is set against, when the ranks span hosts (distributed/link_rate.h); 0: not measured.
  double tcp_seconds = 1;
  // The options shared with `run` (collectives_bench_shared_options): nproc (with hosts, 0: one
  // rank per slot), hosts, hostfile, mca, db, lock_wait, json; the other fields stay unused.
  RunConfig shared = [] {
    RunConfig r;
    r.nproc = 2;
    return r;
  }();
  std::string command_line;
};

// The largest buffer the benchmark allocates per collective call.
inline constexpr int64_t kMaxBenchBytes = int64_t{8} << 30;

// "8", "64K", "256M", "1G" (binary multiples, as nccl-tests reads -b/-e), "4KiB", "16MiB", "100B";
// UsageError for anything else.
int64_t parse_bytes(std::string_view text);

// The options the benchmark shares with `run` (the launch, the db, --json): declared once, in
// session/run_options.cpp, and added to its command by RunFlags, with help of the benchmark's own
// where run's would mislead.
std::span<const SharedOption> collectives_bench_shared_options();

// Validates (UsageError, nothing written), then starts the ranks (or, as a rank, runs the
// sweep). Returns the exit code.
int execute_collectives_bench(const CollectivesBenchConfig& config);

// A row as `--json` and `show --json` give it; with its calls' spread (reports/bench_spread.h)
// when they were kept (v12), under "spread".
// With the link's measured TCP rate (GB/s; 0: none), busbw's fraction of it, "busbw_tcp_fraction".
nlohmann::json collective_bench_json(const store::CollectiveBenchRow& row, const reports::BenchSpread* spread = nullptr,
                                     double tcp_gbps = 0);
// Every row of a run with its spread, from the stored rows and calls.
nlohmann::json collective_bench_rows_json(const std::vector<store::CollectiveBenchRow>& rows,
                                          const std::vector<store::CollectiveBenchSamplesRow>& samples,
                                          double tcp_gbps = 0);
// The metric a run keeps the link's TCP rate in (GB/s), when it was measured.
inline constexpr std::string_view kTcpRateMetric = "tcp_rate_gbps";
// A parameter server's messages across the link, one metric of each per size (NAME.BYTES): their
// mean time alone, beside a busy thread on both ranks, and the rate that thread kept.
inline constexpr std::string_view kPsMessageMetric = "ps_message_ns";
inline constexpr std::string_view kPsMessageBesideMetric = "ps_message_beside_ns";
inline constexpr std::string_view kPsMessageRateMetric = "ps_message_beside_rate";
// The table nccl-tests prints, for the command and for `show`; `tcp`: with busbw's percentage of
// the link's TCP rate (rows then have busbw_tcp_fraction).
std::string format_collective_bench_header(bool tcp = false);
std::string format_collective_bench_row(const nlohmann::json& row);  // as collective_bench_json gives it
// After the table: per row, the rank that took longest and the rank that came in last most
// often, and the spikes (rows with a "spread"); empty when no row has one.
std::string format_collective_bench_spread(const nlohmann::json& rows);

}  // namespace ts::cli
