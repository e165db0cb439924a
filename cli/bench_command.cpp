#include "cli/bench_command.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <memory>
#include <optional>

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/interrupts.h"
#include "cli/launch_job.h"
#include "cli/run_config.h"
#include "distributed/collective_bench.h"
#include "distributed/gpu_assignment.h"
#include "distributed/mpi_communicator.h"
#include "distributed/mpi_runtime.h"
#include "distributed/nccl_rank.h"
#include "distributed/rank_hosts.h"
#include "distributed/stall_watch.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "reports/number_format.h"
#include "session/record.h"
#include "session/run_record.h"
#include "store/writer.h"

namespace ts::cli {

namespace {

const std::vector<std::pair<std::string_view, distributed::Collective>> kCollectives = {
    {"all_reduce", distributed::Collective::all_reduce},
    {"broadcast", distributed::Collective::broadcast},
    {"all_gather", distributed::Collective::all_gather},
    {"reduce_scatter", distributed::Collective::reduce_scatter},
    {"barrier", distributed::Collective::barrier}};

std::vector<distributed::Collective> parse_collectives(const std::vector<std::string>& names) {
  std::vector<distributed::Collective> out;
  if (names.empty()) {
    for (const auto& [name, c] : kCollectives) out.push_back(c);
    return out;
  }
  for (const auto& n : names) {
    const auto it = std::find_if(kCollectives.begin(), kCollectives.end(), [&](const auto& k) { return k.first == n; });
    if (it == kCollectives.end()) {
      throw UsageError("unknown collective '" + n +
                       "' (known: all_reduce, broadcast, all_gather, reduce_scatter, barrier)");
    }
    if (std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  }
  return out;
}

struct Validated {
  distributed::CollectiveBenchOptions options;
};

Validated validate(const CollectivesBenchConfig& c) {
  if (c.backend != "mpi" && c.backend != "nccl") {
    throw UsageError("--backend must be mpi (host memory) or nccl (GPU memory) (got '" + c.backend + "')");
  }
  if (c.backend == "nccl") {
    const std::string why = distributed::nccl_unavailable_reason();
    if (!why.empty()) throw UsageError(why);
    // All ranks on this host (no --hosts/--hostfile): refused here, before mpirun starts any. A
    // rank skips this: its command line has no --nproc (the default would stand in for the job's
    // size); it checks the ranks its host really has, in nccl_rank().
    if (!distributed::launched_as_rank() && c.shared.hosts.empty() && c.shared.hostfile.empty()) {
      const std::string too_few =
          distributed::gpus_too_few(static_cast<int>(c.shared.nproc), distributed::local_gpu_count());
      if (!too_few.empty()) {
        throw UsageError("--nproc " + std::to_string(c.shared.nproc) + ": " + too_few +
                         ", or use --backend mpi (host memory)");
      }
    }
  }
  Validated v;
  v.options.collectives = parse_collectives(c.collectives);
  v.options.min_bytes = parse_bytes(c.min_bytes);
  v.options.max_bytes = parse_bytes(c.max_bytes);
  check_range("--min-bytes", v.options.min_bytes, 1, kMaxBenchBytes);
  check_range("--max-bytes", v.options.max_bytes, 1, kMaxBenchBytes);
  if (v.options.max_bytes < v.options.min_bytes) {
    throw UsageError(
        fmt::format("--max-bytes ({}) is below --min-bytes ({})", v.options.max_bytes, v.options.min_bytes));
  }
  check_range("--factor", c.factor, 2, 1024);
  check_range("--iters", c.iterations, 1, 1'000'000);
  check_range("--warmup", c.warmup, 0, 1'000'000);
  validate_launch(c.shared.nproc, c.shared.hosts, c.shared.hostfile);
  v.options.factor = c.factor;
  v.options.iterations = static_cast<int>(c.iterations);
  v.options.warmup = static_cast<int>(c.warmup);
  try {
    store::Writer::check_target(c.shared.db);
  } catch (const store::StoreError& e) {
    throw UsageError(e.what());
  }
  return v;
}

std::string collective_names(const std::vector<distributed::Collective>& cs) {
  std::string s;
  for (const auto c : cs) s += (s.empty() ? "" : ",") + std::string(distributed::to_string(c));
  return s;
}

std::vector<std::string> rank_arguments(const CollectivesBenchConfig& c, const Validated& v) {
  std::vector<std::string> a = {"bench",          "collectives",
                                "--backend",      c.backend,
                                "--collectives",  collective_names(v.options.collectives),
                                "--min-bytes",    std::to_string(v.options.min_bytes),
                                "--max-bytes",    std::to_string(v.options.max_bytes),
                                "--factor",       std::to_string(c.factor),
                                "--iters",        std::to_string(c.iterations),
                                "--warmup",       std::to_string(c.warmup),
                                "--db",           std::filesystem::absolute(c.shared.db).string(),
                                "--lock-wait",    fmt::format("{}", c.shared.lock_wait.count() / 1000.0),
                                "--command-line", c.command_line};
  if (c.shared.json) a.push_back("--json");
  return a;
}

store::CollectiveBenchRow to_row(const std::string& backend, const distributed::CollectiveBenchResult& r) {
  store::CollectiveBenchRow row;
  row.backend = backend;
  row.collective = std::string(distributed::to_string(r.collective));
  row.bytes = r.bytes;
  row.ranks = r.ranks;
  row.iterations = r.iterations;
  row.time_ns = r.time_ns;
  row.algbw_gbps = r.algbw_gbps;
  row.busbw_gbps = r.busbw_gbps;
  row.min_time_ns = r.min_time_ns;
  row.max_time_ns = r.max_time_ns;
  return row;
}

store::RunInfo bench_info(const CollectivesBenchConfig& c, const Validated& v, const distributed::World& world,
                          const std::vector<std::string>& hosts) {
  store::RunInfo info;
  info.workload = "collectives";
  info.preset = "sweep";
  info.device = c.backend == "nccl" ? "cuda" : "cpu";
  info.iterations = c.iterations;
  info.warmup = c.warmup;
  info.threads = 1;
  info.trace = false;
  info.ranks = world.size;
  info.command_line = c.command_line;
  const nlohmann::json cfg = {{"backend", c.backend},
                              {"collectives", collective_names(v.options.collectives)},
                              {"min_bytes", v.options.min_bytes},
                              {"max_bytes", v.options.max_bytes},
                              {"factor", c.factor},
                              {"iterations", c.iterations},
                              {"warmup", c.warmup},
                              {"ranks", world.size},
                              {"rank_hosts", hosts},
                              {"datatype", "float32"},
                              {"reduce_op", "sum"},
                              {"time", "mean per call, averaged over the ranks (nccl-tests -a 1)"}};
  info.config_json = cfg.dump();
  return info;
}

// What rank 0 keeps of the sweep, and writes as it goes: a sweep cut short keeps its rows. The
// run row itself is the session's RunRecord, as a training run's.
class BenchRecord {
 public:
  BenchRecord(const CollectivesBenchConfig& c, const Validated& v, const distributed::World& world,
              const std::vector<std::string>& hosts)
      : record_(c.shared.db, c.shared.lock_wait, bench_info(c, v, world, hosts)) {
    set_current_run(c.shared.db, record_.id());
    record_.add_environment(session::run_environment(&hosts));
  }

  int64_t run_id() const { return record_.id(); }

  void add(const store::CollectiveBenchRow& row, int64_t wrong) {
    const std::vector<store::CollectiveBenchRow> one = {row};
    record_.writer().add_collective_bench(record_.id(), one);
    rows_.push_back(row);
    wrong_total_ += wrong;
    if (wrong > 0 && first_wrong_.empty())
      first_wrong_ = fmt::format("{} at {} bytes: {} wrong elements", row.collective, row.bytes, wrong);
  }

  void finish(store::RunStatus status, std::string error) {
    const std::vector<store::MetricRow> m = {{"wrong_elements", static_cast<double>(wrong_total_), "elements"}};
    record_.writer().add_metrics(record_.id(), m);
    record_.finish(status, error);
    clear_current_run();
  }

  const std::vector<store::CollectiveBenchRow>& rows() const { return rows_; }
  int64_t wrong_total() const { return wrong_total_; }
  const std::string& first_wrong() const { return first_wrong_; }

 private:
  session::RunRecord record_;
  std::vector<store::CollectiveBenchRow> rows_;
  int64_t wrong_total_ = 0;
  std::string first_wrong_;
};

std::string format_footer(const std::vector<store::CollectiveBenchRow>& rows) {
  std::map<std::string, const store::CollectiveBenchRow*> peak;
  double sum = 0;
  int n = 0;
  for (const auto& r : rows) {
    if (r.collective == "barrier") continue;
    sum += r.busbw_gbps;
    ++n;
    auto& p = peak[r.collective];
    if (!p || r.busbw_gbps > p->busbw_gbps) p = &r;
  }
  std::string s = fmt::format("# avg bus bandwidth: {:.3f} GB/s (over {}, as nccl-tests)\n", n ? sum / n : 0.0,
                              reports::counted(n, "size"));
  for (const auto& [name, r] : peak) {
    s += fmt::format("# {} peak busbw {:.3f} GB/s at {} bytes\n", name, r->busbw_gbps, r->bytes);
  }
  return s;
}

// This process is one rank of the benchmark's job.
int bench_as_rank(const CollectivesBenchConfig& c, const Validated& v) {
  static distributed::MpiRuntime mpi;  // once per process; finalised at exit
  set_stop_deadlines(kRankStopDeadlines);
  const distributed::World& world = mpi.world();
  std::optional<BenchRecord> record;
  try {
    // A rank that stops answering (stopped, cut off) ends the job, named (distributed/stall_watch.h).
    std::optional<distributed::StallWatch> watch;
    if (world.size > 1) watch.emplace(MPI_COMM_WORLD, distributed::StallOptions{.silence_only = true});
    distributed::MpiCommunicator host(MPI_COMM_WORLD);
    host.set_channel("benchmark");
    const std::vector<std::string> hosts = distributed::gather_host_names(host);
    if (world.rank == 0) record.emplace(c, v, world, hosts);
    std::unique_ptr<distributed::Communicator> nccl;
    std::unique_ptr<distributed::BenchMemory> memory = distributed::host_memory();
    if (c.backend == "nccl") {
      distributed::NcclRank rank = distributed::nccl_rank(MPI_COMM_WORLD, world.local_rank, world.local_size);
      nccl = std::move(rank.communicator);
      nccl->set_channel("benchmark nccl");
      memory = std::move(rank.memory);
    }
    distributed::Communicator& measured = nccl ? *nccl : static_cast<distributed::Communicator&>(host);
    if (record && !c.shared.json) {
      say("# trainscope bench collectives: {} backend, {}, float32 sum, {} per size after {} "
          "warm-up\n# time: mean per call averaged over the ranks; min/max: single calls on any rank; "
          "busbw = algbw x bus factor (nccl-tests)\n{}",
          c.backend, reports::counted(world.size, "rank"), reports::counted(c.iterations, "timed call"), c.warmup,
          format_collective_bench_header());
      std::fflush(stdout);
    }
    const bool finished = distributed::run_collective_bench(
        measured, host, *memory, v.options, &stop_flag(), [&](const distributed::CollectiveBenchResult& r) {
          if (!record) return;
          const auto row = to_row(c.backend, r);
          record->add(row, r.wrong);
          if (!c.shared.json) {
            say("{}{}\n", format_collective_bench_row(collective_bench_json(row)),
                r.wrong ? fmt::format("  {} WRONG", r.wrong) : "");
            std::fflush(stdout);
          }
        });
    // Every rank ends together: one that stops meanwhile is found, not waited for in MPI_Finalize.
    distributed::StallWatch::set_phase(distributed::RunPhase::ending);
    host.barrier("end of benchmark");
    if (!record) return kExitOk;
    store::RunStatus status = finished ? store::RunStatus::completed : store::RunStatus::interrupted;
    std::string error;
    if (record->wrong_total() > 0) {
      status = store::RunStatus::failed;
      error = "results differ from the expected values: " + record->first_wrong();
    }
    record->finish(status, error);
    if (c.shared.json) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& r : record->rows()) rows.push_back(collective_bench_json(r));
      say("{}\n", nlohmann::json{{"db", std::filesystem::absolute(c.shared.db).string()},
                                 {"run_id", record->run_id()},
                                 {"status", std::string(store::to_string(status))},
                                 {"wrong_elements", record->wrong_total()},
                                 {"rows", rows}}
                      .dump(2));
    } else {
      say("{}# stored in {} as run {} ({})\n", format_footer(record->rows()), c.shared.db.string(), record->run_id(),
          store::to_string(status));
    }
    if (!error.empty()) say(stderr, "trainscope: {}\n", error);
    return status == store::RunStatus::completed     ? kExitOk
           : status == store::RunStatus::interrupted ? kExitInterrupted
                                                     : kExitRunFailed;
  } catch (const std::exception& e) {
    say(stderr, "trainscope: rank {}: the collectives benchmark failed: {}\n", world.rank, e.what());
    if (record) record->finish(store::RunStatus::failed, e.what());
    // The other ranks wait in a collective for this one: end the job rather than leave them there.
    if (world.size > 1) distributed::MpiRuntime::abort_job(kExitRunFailed);
    return kExitRunFailed;
  }
}

}  // namespace

int64_t parse_bytes(std::string_view text) {
  const std::string shown(text);
  int64_t value = 0;
  const auto [at, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || at == text.data() || value < 0) {
    throw UsageError("'" + shown + "' is not a size in bytes (e.g. 8, 64K, 256M, 1G)");
  }
  std::string unit(at, text.data() + text.size());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char ch) { return std::toupper(ch); });
  int shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K" || unit == "KIB") {
    shift = 10;
  } else if (unit == "M" || unit == "MIB") {
    shift = 20;
  } else if (unit == "G" || unit == "GIB") {
    shift = 30;
  } else {
    throw UsageError("'" + shown + "' is not a size in bytes (units: B, K/KiB, M/MiB, G/GiB)");
  }
  if (value > (kMaxBenchBytes >> shift)) {
    throw UsageError(
        fmt::format("'{}' is larger than the benchmark's largest buffer ({} bytes)", shown, kMaxBenchBytes));
  }
  return value << shift;
}

nlohmann::json collective_bench_json(const store::CollectiveBenchRow& r) {
  return {{"backend", r.backend},
          {"collective", r.collective},
          {"bytes", r.bytes},
          {"ranks", r.ranks},
          {"iterations", r.iterations},
          {"time_ns", r.time_ns},
          {"min_time_ns", r.min_time_ns},
          {"max_time_ns", r.max_time_ns},
          {"algbw_gbps", r.algbw_gbps},
          {"busbw_gbps", r.busbw_gbps}};
}

std::string format_collective_bench_header() {
  return fmt::format("# {:<15}{:>12}{:>7}{:>13}{:>13}{:>13}{:>13}{:>13}\n", "collective", "size(B)", "ranks",
                     "time(us)", "min(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)");
}

std::string format_collective_bench_row(const nlohmann::json& r) {
  return fmt::format("  {:<15}{:>12}{:>7}{:>13.2f}{:>13.2f}{:>13.2f}{:>13.3f}{:>13.3f}",
                     r["collective"].get<std::string>(), r["bytes"].get<int64_t>(), r["ranks"].get<int64_t>(),
                     r["time_ns"].get<double>() / 1e3, static_cast<double>(r["min_time_ns"].get<int64_t>()) / 1e3,
                     static_cast<double>(r["max_time_ns"].get<int64_t>()) / 1e3, r["algbw_gbps"].get<double>(),
                     r["busbw_gbps"].get<double>());
}

std::span<const SharedOption> collectives_bench_shared_options() {
  static const SharedOption shared[] = {{"nproc", "Ranks, started through mpirun (with --hosts: one per slot)"},
                                        {"hosts", "Hosts and their slots, e.g. h1:1,h2:1 (default: this machine)"},
                                        {"hostfile"},
                                        {"mca"},
                                        {"db"},
                                        {"lock-wait", "Seconds the write waits for a db another process has locked"},
                                        {"json", "Print the results as JSON"}};
  return shared;
}

int execute_collectives_bench(const CollectivesBenchConfig& c) {
  const Validated v = validate(c);
  if (distributed::launched_as_rank()) return rank_exit_status(bench_as_rank(c, v));
  JobLaunch job = job_launch(c.shared);
  job.rank_args = rank_arguments(c, v);
  const LaunchedJob launched = launch_job(job);
  switch (launched.status) {
    case store::RunStatus::completed: return kExitOk;
    case store::RunStatus::interrupted: return kExitInterrupted;
    default: return kExitRunFailed;
  }
}

}  // namespace ts::cli
