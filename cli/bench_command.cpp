#include "cli/bench_command.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/interrupts.h"
#include "cli/launch_job.h"
#include "cli/run_config.h"
#include "distributed/collective_bench.h"
#include "distributed/comm_figures.h"
#include "distributed/gpu_assignment.h"
#include "distributed/link_rate.h"
#include "distributed/mpi_communicator.h"
#include "distributed/mpi_runtime.h"
#include "distributed/nccl_rank.h"
#include "distributed/ps/message_bench.h"
#include "distributed/rank_hosts.h"
#include "distributed/stall_watch.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "reports/number_format.h"
#include "session/record.h"
#include "session/run_record.h"
#include "store/reader.h"
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

// The longest --timeout: a week.
constexpr double kMaxTimeoutSeconds = 7 * 86400.0;
// A parameter server's messages timed per size (alone, and as many beside compute), across hosts.
constexpr int kPsMessages = 8;

nlohmann::json ps_messages_json(const std::vector<distributed::ps::PsMessageRate>& rates) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rates)
    out.push_back({{"bytes", r.bytes}, {"ns", r.ns}, {"beside_ns", r.beside_ns}, {"beside_rate", r.beside_rate}});
  return out;
}

// TS_TEST_BENCH_STALL=RANK:SECONDS or all:SECONDS (tests only): that rank (every rank) sleeps
// before its first timed call, alive and answering its stall watch, so a test can hold the sweep
// up: one rank, and the others wait for it in a call; every rank, and none is in a call.
void plant_test_stall(distributed::CollectiveBenchOptions& o, int my_rank) {
  const char* spec = std::getenv("TS_TEST_BENCH_STALL");
  if (!spec || !*spec) return;
  int rank = -1;
  double seconds = 0;
  const bool all = std::sscanf(spec, "all:%lf", &seconds) == 1;
  if (!all && (std::sscanf(spec, "%d:%lf", &rank, &seconds) != 2 || rank != my_rank)) return;
  if (!(seconds > 0)) return;
  auto done = std::make_shared<bool>(false);
  o.before_timed_call = [done, seconds](distributed::Collective, int64_t, int) {
    if (*done) return;
    *done = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  };
}

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
  if (!std::isfinite(c.timeout_s) || c.timeout_s < 0 || c.timeout_s > kMaxTimeoutSeconds) {
    throw UsageError(
        fmt::format("--timeout must be between 0 (no limit) and {} seconds (got {})", kMaxTimeoutSeconds, c.timeout_s));
  }
  if (!std::isfinite(c.tcp_seconds) || c.tcp_seconds < 0 || c.tcp_seconds > 60) {
    throw UsageError(fmt::format("--tcp-seconds must be between 0 (not measured) and 60 (got {})", c.tcp_seconds));
  }
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
                                "--timeout",      fmt::format("{}", c.timeout_s),
                                "--tcp-seconds",  fmt::format("{}", c.tcp_seconds),
                                "--db",           std::filesystem::absolute(c.shared.db).string(),
                                "--lock-wait",    fmt::format("{}", c.shared.lock_wait.count() / 1000.0),
                                "--command-line", c.command_line};
  if (c.shared.json) a.push_back("--json");
  return a;
}

// Each rank's calls of a result, as stored.
std::vector<store::CollectiveBenchSamplesRow> samples_of(const distributed::CollectiveBenchResult& r) {
  std::vector<store::CollectiveBenchSamplesRow> out;
  const auto n = static_cast<size_t>(r.iterations);
  for (int rank = 0; rank < r.ranks && n > 0 && r.samples_ns.size() >= (static_cast<size_t>(rank) + 1) * n; ++rank) {
    const auto first = r.samples_ns.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(rank) * n);
    out.push_back({std::string(distributed::to_string(r.collective)), r.bytes, rank,
                   std::vector<int64_t>(first, first + static_cast<std::ptrdiff_t>(n))});
  }
  return out;
}

store::CollectiveBenchRow to_row(const std::string& backend, const distributed::CollectiveBenchResult& r,
                                 const reports::BenchSpread& spread) {
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
  row.bus_factor = distributed::bus_factor(r.collective, r.ranks);
  row.p50_ns = spread.p50_ns;
  row.p99_ns = spread.p99_ns;
  row.samples = spread.samples;
  row.beside_rate = r.beside_rate;
  row.beside_ns = r.beside_ns;
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
                              {"time", "mean per call, averaged over the ranks (nccl-tests -a 1)"},
                              {"timeout_s", c.timeout_s},
                              {"spike_factor", reports::kSpikeFactor}};
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

  // The link's TCP rate, kept beside the rows: a metric (GB/s) and what was measured, in words.
  void set_link(const distributed::LinkRate& link) {
    if (link.measured) {
      tcp_gbps_ = link.gbps;
      const std::vector<store::MetricRow> m = {{std::string(kTcpRateMetric), link.gbps, "GB/s"}};
      record_.writer().add_metrics(record_.id(), m);
    }
    const std::vector<store::EnvEntry> e = {{"tcp_rate", link.describe()}};
    record_.add_environment(e);
  }
  double tcp_gbps() const { return tcp_gbps_; }
  // A parameter server's messages across the link, per size (metrics NAME.BYTES).
  void set_ps_messages(const std::vector<distributed::ps::PsMessageRate>& rates) {
    std::vector<store::MetricRow> m;
    for (const auto& r : rates) {
      const std::string size = "." + std::to_string(r.bytes);
      m.push_back({std::string(kPsMessageMetric) + size, r.ns, "ns"});
      m.push_back({std::string(kPsMessageBesideMetric) + size, r.beside_ns, "ns"});
      m.push_back({std::string(kPsMessageRateMetric) + size, r.beside_rate, ""});
    }
    record_.writer().add_metrics(record_.id(), m);
  }
  // How many ranks share each machine (namespace hosts share one): the cores each rank had.
  void set_ranks_per_machine(int n) {
    const std::vector<store::EnvEntry> e = {{"ranks_per_machine", std::to_string(n)}};
    record_.add_environment(e);
  }

  void add(const store::CollectiveBenchRow& row, const std::vector<store::CollectiveBenchSamplesRow>& samples,
           const reports::BenchSpread& spread, int64_t wrong) {
    const std::vector<store::CollectiveBenchRow> one = {row};
    {
      store::Writer::Transaction tx(record_.writer());  // the row and its calls together
      record_.writer().add_collective_bench(record_.id(), one);
      record_.writer().add_collective_bench_samples(record_.id(), samples);
      tx.commit();
    }
    rows_.push_back(row);
    json_rows_.push_back(collective_bench_json(row, &spread, tcp_gbps_));
    spikes_ += spread.spikes;
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
  const nlohmann::json& json_rows() const { return json_rows_; }
  int64_t spikes() const { return spikes_; }
  int64_t wrong_total() const { return wrong_total_; }
  const std::string& first_wrong() const { return first_wrong_; }

 private:
  session::RunRecord record_;
  std::vector<store::CollectiveBenchRow> rows_;
  nlohmann::json json_rows_ = nlohmann::json::array();
  int64_t spikes_ = 0;
  double tcp_gbps_ = 0;
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
int bench_as_rank(const CollectivesBenchConfig& c, Validated v) {
  static distributed::MpiRuntime mpi;  // once per process; finalised at exit
  set_stop_deadlines(kRankStopDeadlines);
  const distributed::World& world = mpi.world();
  std::optional<BenchRecord> record;
  // --timeout counts from here, on each rank's clock: passed between sizes, every rank stops
  // there; passed in a call, the stall watch ends the job naming what the call waits for.
  const std::string limit_text = fmt::format("the sweep's --timeout of {} s passed", c.timeout_s);
  if (c.timeout_s > 0) {
    v.options.deadline =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(c.timeout_s));
  }
  plant_test_stall(v.options, world.rank);
  try {
    // A rank that stops answering (stopped, cut off) ends the job, named (distributed/stall_watch.h);
    // so does a call still in flight when --timeout passes.
    std::optional<distributed::StallWatch> watch;
    if (world.size > 1) {
      watch.emplace(
          MPI_COMM_WORLD,
          distributed::StallOptions{.silence_only = true, .limit_at = v.options.deadline, .limit_text = limit_text});
    }
    distributed::MpiCommunicator host(MPI_COMM_WORLD);
    host.set_channel("benchmark");
    const std::vector<std::string> hosts = distributed::gather_host_names(host);
    const int per_machine = distributed::most_ranks_per_machine(distributed::gather_machine_ids(host));
    if (world.rank == 0) {
      record.emplace(c, v, world, hosts);
      record->set_ranks_per_machine(per_machine);
    }
    std::unique_ptr<distributed::Communicator> nccl;
    std::unique_ptr<distributed::BenchMemory> memory = distributed::host_memory();
    if (c.backend == "nccl") {
      distributed::NcclRank rank = distributed::nccl_rank(MPI_COMM_WORLD, world.local_rank, world.local_size);
      nccl = std::move(rank.communicator);
      nccl->set_channel("benchmark nccl");
      memory = std::move(rank.memory);
    }
    distributed::Communicator& measured = nccl ? *nccl : static_cast<distributed::Communicator&>(host);
    // Ranks on two hosts or more: the TCP rate from rank 0's host to the next host's first rank.
    std::optional<distributed::LinkRate> link;
    std::vector<distributed::ps::PsMessageRate> ps_rates;
    const auto other = std::find_if(hosts.begin(), hosts.end(), [&](const std::string& h) { return h != hosts[0]; });
    if (c.tcp_seconds > 0 && other != hosts.end()) {
      const int to = static_cast<int>(other - hosts.begin());
      link = distributed::measure_tcp_rate(host, 0, to, std::chrono::milliseconds(std::llround(c.tcp_seconds * 1000)));
      if (record) {
        record->set_link(*link);
        if (!c.shared.json) say("# TCP rate {}: {}\n", fmt::format("{} -> {}", hosts[0], *other), link->describe());
      }
      // And a parameter server's messages from that rank to rank 0, as a worker's pushes go.
      ps_rates =
          distributed::ps::measure_ps_messages(MPI_COMM_WORLD, 0, to, distributed::ps::ps_message_sizes(), kPsMessages);
      if (record) {
        record->set_ps_messages(ps_rates);
        if (!c.shared.json) {
          std::string line;
          for (const auto& r : ps_rates)
            line += fmt::format("{}{} {:.2f} ms ({:.2f} beside compute, which kept {:.0f}%)", line.empty() ? "" : "; ",
                                reports::human_bytes(static_cast<double>(r.bytes)), r.ns / 1e6, r.beside_ns / 1e6,
                                100 * r.beside_rate);
          say("# a parameter server's messages {} -> {}: {}\n", *other, hosts[0], line);
        }
      }
    }
    if (record && !c.shared.json) {
      say("# trainscope bench collectives: {} backend, {}, float32 sum, {} per size after {} "
          "warm-up\n# time: mean per call averaged over the ranks; min/max: single calls on any rank; "
          "p50/p99: of the calls, each its slowest rank's; busbw = algbw x bus factor (nccl-tests){}\n{}",
          c.backend, reports::counted(world.size, "rank"), reports::counted(c.iterations, "timed call"), c.warmup,
          record->tcp_gbps() > 0 ? "; %tcp: busbw / the TCP rate" : "",
          format_collective_bench_header(record->tcp_gbps() > 0));
      std::fflush(stdout);
    }
    std::string last_size = "before the first size";
    const distributed::BenchEnd end = distributed::run_collective_bench(
        measured, host, *memory, v.options, &stop_flag(), [&](const distributed::CollectiveBenchResult& r) {
          if (!record) return;
          const auto samples = samples_of(r);
          const reports::BenchSpread spread = reports::bench_spread(samples);
          const auto row = to_row(c.backend, r, spread);
          record->add(row, samples, spread, r.wrong);
          last_size = fmt::format("after {} at {} bytes", row.collective, row.bytes);
          if (!c.shared.json) {
            say("{}{}\n", format_collective_bench_row(collective_bench_json(row, nullptr, record->tcp_gbps())),
                r.wrong ? fmt::format("  {} WRONG", r.wrong) : "");
            std::fflush(stdout);
          }
        });
    // Every rank ends together: one that stops meanwhile is found, not waited for in MPI_Finalize.
    distributed::StallWatch::set_phase(distributed::RunPhase::ending);
    host.barrier("end of benchmark");
    if (!record) return kExitOk;
    store::RunStatus status =
        end == distributed::BenchEnd::stopped ? store::RunStatus::interrupted : store::RunStatus::completed;
    std::string error;
    if (end == distributed::BenchEnd::timed_out) {
      status = store::RunStatus::failed;
      error = fmt::format("{}{} (between sizes, {}): kept {} measured", distributed::kTimeoutWords, limit_text,
                          last_size, reports::counted(static_cast<int64_t>(record->rows().size()), "size"));
    }
    if (record->wrong_total() > 0) {
      status = store::RunStatus::failed;
      error = "results differ from the expected values: " + record->first_wrong();
    }
    record->finish(status, error);
    if (c.shared.json) {
      say("{}\n", nlohmann::json{{"db", std::filesystem::absolute(c.shared.db).string()},
                                 {"run_id", record->run_id()},
                                 {"status", std::string(store::to_string(status))},
                                 {"error", error},
                                 {"timed_out", end == distributed::BenchEnd::timed_out},
                                 {"timeout_s", c.timeout_s},
                                 {"wrong_elements", record->wrong_total()},
                                 {"spike_factor", reports::kSpikeFactor},
                                 {"spikes", record->spikes()},
                                 {"tcp_rate", link ? nlohmann::json{{"measured", link->measured},
                                                                    {"why_not", link->why_not},
                                                                    {"from_rank", link->from},
                                                                    {"to_rank", link->to},
                                                                    {"address", link->address},
                                                                    {"bytes", link->bytes},
                                                                    {"ns", link->ns},
                                                                    {"gbps", link->gbps}}
                                                   : nlohmann::json(nullptr)},
                                 {"ps_messages", ps_messages_json(ps_rates)},
                                 {"rows", record->json_rows()}}
                      .dump(2));
    } else {
      say("{}{}# stored in {} as run {} ({})\n", format_footer(record->rows()),
          format_collective_bench_spread(record->json_rows()), c.shared.db.string(), record->run_id(),
          store::to_string(status));
    }
    if (!error.empty()) say(stderr, "trainscope: {}\n", error);
    return end == distributed::BenchEnd::timed_out   ? kExitTimedOut
           : status == store::RunStatus::completed   ? kExitOk
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

nlohmann::json collective_bench_json(const store::CollectiveBenchRow& r, const reports::BenchSpread* spread,
                                     double tcp_gbps) {
  // Percentiles a row does not have (written before v12) are null.
  const auto percentile = [](double ns) { return ns < 0 ? nlohmann::json(nullptr) : nlohmann::json(ns); };
  nlohmann::json j = {{"backend", r.backend},
                      {"collective", r.collective},
                      {"bytes", r.bytes},
                      {"ranks", r.ranks},
                      {"iterations", r.iterations},
                      {"time_ns", r.time_ns},
                      {"min_time_ns", r.min_time_ns},
                      {"max_time_ns", r.max_time_ns},
                      {"p50_ns", percentile(r.p50_ns)},
                      {"p99_ns", percentile(r.p99_ns)},
                      {"samples", r.samples},
                      {"algbw_gbps", r.algbw_gbps},
                      {"bus_factor", r.bus_factor},
                      {"busbw_gbps", r.busbw_gbps}};
  if (tcp_gbps > 0) j["busbw_tcp_fraction"] = r.busbw_gbps / tcp_gbps;
  if (spread && spread->samples > 0) {
    const auto at = [](const std::vector<int64_t>& v, int64_t rank) {
      return rank >= 0 && static_cast<size_t>(rank) < v.size() ? v[static_cast<size_t>(rank)] : 0;
    };
    j["spread"] = {{"calls", spread->calls},
                   {"longest_rank", spread->longest_rank},
                   {"longest_rank_calls", at(spread->longest, spread->longest_rank)},
                   {"longest_by_rank", spread->longest},
                   {"last_in_rank", spread->last_in_rank},
                   {"last_in_rank_calls", at(spread->last_in, spread->last_in_rank)},
                   {"last_in_by_rank", spread->last_in},
                   {"spikes", spread->spikes},
                   {"spikes_by_rank", spread->spikes_by_rank},
                   {"worst_ratio", spread->worst_ratio},
                   {"worst_rank", spread->worst_rank},
                   {"worst_call", spread->worst_call}};
  }
  return j;
}

nlohmann::json collective_bench_rows_json(const std::vector<store::CollectiveBenchRow>& rows,
                                          const std::vector<store::CollectiveBenchSamplesRow>& samples,
                                          double tcp_gbps) {
  const auto spreads = reports::bench_spreads(samples);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    const auto it = spreads.find({r.collective, r.bytes});
    out.push_back(collective_bench_json(r, it == spreads.end() ? nullptr : &it->second, tcp_gbps));
  }
  return out;
}

std::string format_collective_bench_header(bool tcp) {
  return fmt::format("# {:<15}{:>12}{:>7}{:>12}{:>12}{:>12}{:>12}{:>12}{:>13}{:>7}{:>13}{}\n", "collective", "size(B)",
                     "ranks", "time(us)", "min(us)", "max(us)", "p50(us)", "p99(us)", "algbw(GB/s)", "bus",
                     "busbw(GB/s)", tcp ? fmt::format("{:>7}", "%tcp") : "");
}

std::string format_collective_bench_row(const nlohmann::json& r) {
  const auto us = [](const nlohmann::json& ns) {
    return ns.is_number() ? fmt::format("{:.2f}", ns.get<double>() / 1e3) : std::string("-");
  };
  return fmt::format(
      "  {:<15}{:>12}{:>7}{:>12.2f}{:>12.2f}{:>12.2f}{:>12}{:>12}{:>13.3f}{:>7.3f}{:>13.3f}{}",
      r["collective"].get<std::string>(), r["bytes"].get<int64_t>(), r["ranks"].get<int64_t>(),
      r["time_ns"].get<double>() / 1e3, static_cast<double>(r["min_time_ns"].get<int64_t>()) / 1e3,
      static_cast<double>(r["max_time_ns"].get<int64_t>()) / 1e3, us(r.value("p50_ns", nlohmann::json())),
      us(r.value("p99_ns", nlohmann::json())), r["algbw_gbps"].get<double>(), r.value("bus_factor", 0.0),
      r["busbw_gbps"].get<double>(),
      r.contains("busbw_tcp_fraction") ? fmt::format("{:>7.1f}", 100 * r["busbw_tcp_fraction"].get<double>()) : "");
}

std::string format_collective_bench_spread(const nlohmann::json& rows) {
  std::string s;
  for (const auto& r : rows) {
    if (!r.contains("spread")) continue;
    const auto& sp = r["spread"];
    const auto who = [&](std::string_view rank_key, std::string_view calls_key) {
      const int64_t rank = sp[std::string(rank_key)].get<int64_t>();
      return rank < 0 ? std::string("-")
                      : fmt::format("rank {} ({}/{})", rank, sp[std::string(calls_key)].get<int64_t>(),
                                    sp["calls"].get<int64_t>());
    };
    std::string spikes = std::to_string(sp["spikes"].get<int64_t>());
    if (sp["spikes"].get<int64_t>() > 0) {
      std::vector<std::string> by_rank;
      const auto& v = sp["spikes_by_rank"];
      for (size_t k = 0; k < v.size(); ++k) {
        if (v[k].get<int64_t>() > 0) by_rank.push_back(fmt::format("r{}:{}", k, v[k].get<int64_t>()));
      }
      spikes += fmt::format(" ({})", fmt::join(by_rank, " "));
    }
    const std::string worst = sp["worst_rank"].get<int64_t>() < 0
                                  ? std::string("-")
                                  : fmt::format("{:.1f} (rank {}, call {})", sp["worst_ratio"].get<double>(),
                                                sp["worst_rank"].get<int64_t>(), sp["worst_call"].get<int64_t>());
    s += fmt::format("  {:<15}{:>12}  {:<20}{:<20}{:<20}{}\n", r["collective"].get<std::string>(),
                     r["bytes"].get<int64_t>(), who("longest_rank", "longest_rank_calls"),
                     who("last_in_rank", "last_in_rank_calls"), spikes, worst);
  }
  if (s.empty()) return s;
  return fmt::format("# stragglers and spikes: per call, the rank whose call took longest and the rank that came in "
                     "last;\n# a spike: a call above {} x its row's p50 (docs/formulas.md)\n"
                     "# {:<15}{:>12}  {:<20}{:<20}{:<20}{}\n",
                     reports::kSpikeFactor, "collective", "size(B)", "longest", "last in", "spikes", "worst(x p50)") +
         s;
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
  // Timed out: between sizes (rank 0's reason) or in a call (the stall watch's, stored by the launch).
  if (launched.run_id > 0 && launched.status == store::RunStatus::failed) {
    if (const auto row = store::Reader(c.shared.db).run(launched.run_id);
        row && row->error.starts_with(distributed::kTimeoutWords)) {
      return kExitTimedOut;
    }
  }
  switch (launched.status) {
    case store::RunStatus::completed: return kExitOk;
    case store::RunStatus::interrupted: return kExitInterrupted;
    default: return kExitRunFailed;
  }
}

}  // namespace ts::cli
