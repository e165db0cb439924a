// trainscope: train a workload, profile it, store it; list, inspect and compare what is stored.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "cli/bench_command.h"
#include "cli/exit_codes.h"
#include "cli/import_command.h"
#include "cli/interrupts.h"
#include "cli/list.h"
#include "cli/play.h"
#include "cli/run_command.h"
#include "cli/report_command.h"
#include "cli/suite.h"
#include "cli/summary.h"
#include "distributed/mpi_runtime.h"
#include "fmt/format.h"
#include "reports/chrome_trace.h"
#include "reports/output_file.h"
#include "store/error.h"

using namespace ts::cli;

namespace {

std::string join_args(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

// --mca NAME=VALUE options as name/value pairs.
std::vector<std::pair<std::string, std::string>> parse_mca(const std::vector<std::string>& options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& m : options) {
    auto pair = split_mca(m);
    if (!pair) throw UsageError("--mca takes NAME=VALUE, not '" + m + "'");
    out.push_back(std::move(*pair));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trainscope: benchmark and profile DNN training (time and memory), stored in SQLite"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("trainscope 0.1.0"));

  RunConfig rc;
  rc.command_line = join_args(argc, argv);
  int64_t batch = 0;
  int64_t learners = 0;
  auto* run = app.add_subcommand("run", "Train WORKLOAD, profile it and store the run");
  // Whole decimal numbers that fit, or exit 2: CLI11 alone clamps 99999999999999999999 to the
  // largest int64 and wraps --seed -1. Ranges are validate()'s.
  const CLI::Validator int64_text(check_int64_text, "");
  const CLI::Validator uint64_text(check_uint64_text, "");
  run->add_option("workload", rc.workload, "Workload name (see `trainscope list`)")->required();
  run->add_option("--preset", rc.preset, "tiny | small | full")->capture_default_str();
  run->add_option("--device", rc.device, "cpu (cuda in CUDA builds)")->capture_default_str();
  auto* batch_opt = run->add_option("--batch", batch, "Batch size (default: the preset's)")->transform(int64_text);
  auto* learners_opt =
      run->add_option("--learners", learners, "Actor-learner threads, for workloads that have them (a3c; default: the preset's)")
          ->transform(int64_text);
  run->add_option("--iters", rc.iterations, "Timed iterations")->capture_default_str()->transform(int64_text);
  run->add_option("--warmup", rc.warmup, "Warm-up iterations, excluded from the figures")
      ->capture_default_str()
      ->transform(int64_text);
  run->add_option("--threads", rc.threads, "CPU threads (default: all cores)")->transform(int64_text);
  run->add_option("--seed", rc.seed, "Random seed")->capture_default_str()->transform(uint64_text);
  run->add_option("--data", rc.data, "synthetic | fashion-mnist[:DIR]")->capture_default_str();
  run->add_option("--eval-batches", rc.eval_batches, "Held-out batches for the quality metric (0: none)")
      ->capture_default_str()
      ->transform(int64_text);
  run->add_option("--eval-every", rc.eval_every,
                  "Also evaluate after every N timed iterations, outside the timed figures: the quality curve (0: "
                  "only at the end)")
      ->capture_default_str()
      ->transform(int64_text);
  double quality_target = 0;
  auto* quality_target_opt = run->add_option(
      "--quality-target", quality_target,
      "The quality (the workload's metric) whose first evaluation at or past it gives the run's time to quality; "
      "needs --eval-every");
  run->add_option("--db", rc.db, "SQLite file to store into")->capture_default_str();
  run->add_flag("--no-trace{false}", rc.trace, "Do not record per-op events (phases are still timed)");
  run->add_flag("--roofline", rc.roofline,
                "After training, measure the machine's SGEMM peak and copy bandwidth (about 2 s) and store them "
                "beside the step's roofline (docs/formulas.md)");
  double flush_seconds = 2.0, lock_wait_seconds = 60.0;
  run->add_option("--flush-interval", flush_seconds,
                  "Seconds between writes while the run goes on: a run killed keeps all but the last interval")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str();
  run->add_option("--lock-wait", lock_wait_seconds,
                  "Seconds the final write waits for a db another process has locked, before writing the run to a "
                  "side file to import")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  run->add_flag("--json", rc.json, "Print the summary as JSON");
  // Distribution (docs/distributed.md).
  auto* nproc_opt =
      run->add_option("--nproc", rc.nproc,
                      "Ranks (processes) to train with, started through mpirun (with --hosts: one per slot); with "
                      "--strategy ps the workers, dedicated servers coming on top")
          ->capture_default_str()
      ->transform(int64_text);
  run->add_option("--hosts", rc.hosts, "Hosts and their slots for the ranks, e.g. h1:2,h2:2 (default: this machine)");
  run->add_option("--hostfile", rc.hostfile, "File of hosts (`host slots=N` per line), instead of --hosts");
  std::vector<std::string> mca;
  run->add_option("--mca", mca, "NAME=VALUE passed to mpirun as --mca NAME VALUE (repeatable)");
  // How the ranks share what they learn (docs/cli.md, "Strategies"): all-reduce data parallelism
  // (the default) or a parameter server. Each strategy's own options are refused with the other.
  StrategyInput strategy_input;
  std::string strategy = "allreduce";
  auto* strategy_opt = run->add_option("--strategy", strategy,
                                       "allreduce (data parallel: gradients averaged by all-reduce) | ps (parameter "
                                       "server: workers push gradients to server shards and pull parameters)")
                           ->capture_default_str();
  // The all-reduce's options (--strategy allreduce).
  auto* bucket_mb_opt = run->add_option("--bucket-mb", rc.data_parallel.bucket_mb, "Gradient bucket size in MiB for the all-reduce")
      ->check(CLI::Range(0.001, 4096.0))
      ->capture_default_str();
  std::string bucket_order = "arrival";
  auto* bucket_order_opt =
      run->add_option("--bucket-order", bucket_order,
                      "arrival (rebuilt from the first iteration's gradient order, as DDP) | reverse_registration")
          ->check(CLI::IsMember({"arrival", "reverse_registration"}))
          ->capture_default_str();
  bool no_overlap = false;
  auto* no_overlap_opt = run->add_flag("--no-overlap", no_overlap, "All-reduce the gradients after backward instead of during it");
  run->add_flag("--priority", rc.data_parallel.priority,
                "Partition gradients and send the front layers' first (ByteScheduler/P3); with --strategy ps: push "
                "and pull the front layers' keys first");
  bool no_cross_barrier = false;
  auto* no_cross_barrier_opt =
      run->add_flag("--no-cross-barrier", no_cross_barrier,
                    "With --priority: run the optimizer after every gradient is averaged, not per parameter as each "
                    "arrives (the next forward then waits for the whole step)");
  auto* partition_mb_opt =
      run->add_option("--partition-mb", rc.data_parallel.partition_mb, "With --priority: partition size in MiB")
          ->check(CLI::Range(0.001, 4096.0))
          ->capture_default_str();
  // The parameter server's options (--strategy ps).
  int64_t servers = 1;
  auto* servers_opt =
      run->add_option("--servers", servers,
                      "With --strategy ps: server shards (1 to 4096); co-located servers run beside workers 0..S-1, "
                      "so there are at most as many as workers")
          ->capture_default_str()
          ->transform(int64_text);
  bool dedicated_servers = false;
  auto* dedicated_opt = run->add_flag("--dedicated-servers", dedicated_servers,
                "With --strategy ps: the servers are ranks of their own, started after the --nproc workers");
  std::string server_hosts;
  auto* server_hosts_opt =
      run->add_option("--server-hosts", server_hosts,
                      "With --strategy ps: the dedicated servers' hosts and their slots, e.g. s1:1,s2:1 (as --hosts; "
                      "implies --dedicated-servers)");
  std::string ps_mode = "sync";
  auto* ps_mode_opt = run->add_option("--ps-mode", ps_mode,
                                      "With --strategy ps: sync | async | bounded (at most --staleness steps ahead of "
                                      "the slowest worker) | eager (servers push new values as they update)")
                          ->capture_default_str();
  int64_t staleness = 0;
  auto* staleness_opt =
      run->add_option("--staleness", staleness,
                      "With --strategy ps: the most steps a worker may run ahead of the slowest, 0 to 1000000 (implies "
                      "--ps-mode bounded)")
          ->capture_default_str()
          ->transform(int64_text);
  double chunk_mb = 1.0;
  auto* chunk_mb_opt = run->add_option("--chunk-mb", chunk_mb,
                                       "With --strategy ps: tensors larger than this are cut into keys of this size, MiB "
                                       "(more than 0.001, at most 4096)")
                           ->capture_default_str();
  // The launcher hands its own command line to the ranks, so the run records what the user typed.
  run->add_option("--command-line", rc.command_line)->group("");
  // A suite's run launched over ranks: which suite, entry and repeat (hidden: the suite sets them).
  run->add_option("--suite-name", rc.suite.name)->group("");
  run->add_option("--suite-entry", rc.suite.entry)->group("");
  run->add_option("--suite-repeat", rc.suite.repeat)->group("");

  // The collectives benchmark (docs/distributed.md, "Collectives benchmark").
  CollectivesBenchConfig bc;
  bc.command_line = rc.command_line;
  auto* bench = app.add_subcommand("bench", "Benchmarks of the machine itself, outside training");
  bench->require_subcommand(1);
  auto* bench_coll = bench->add_subcommand(
      "collectives", "Time all-reduce, broadcast, all-gather, reduce-scatter and barrier over N ranks, as nccl-tests");
  bench_coll->add_option("--backend", bc.backend, "mpi (host memory) | nccl (GPU memory; CUDA builds)")
      ->capture_default_str();
  bench_coll->add_option("--collectives", bc.collectives,
                         "Which, comma separated: all_reduce,broadcast,all_gather,reduce_scatter,barrier (default: all)")
      ->delimiter(',');
  bench_coll->add_option("--min-bytes", bc.min_bytes, "Smallest size (B, K, M, G: binary multiples)")->capture_default_str();
  bench_coll->add_option("--max-bytes", bc.max_bytes, "Largest size")->capture_default_str();
  bench_coll->add_option("--factor", bc.factor, "Each size is the previous one times this")
      ->capture_default_str()
      ->transform(int64_text);
  bench_coll->add_option("--iters", bc.iterations, "Timed calls per size")->capture_default_str()->transform(int64_text);
  bench_coll->add_option("--warmup", bc.warmup, "Untimed calls per size before them")
      ->capture_default_str()
      ->transform(int64_text);
  auto* bench_nproc = bench_coll->add_option("--nproc", bc.nproc, "Ranks, started through mpirun (with --hosts: one per slot)")
                          ->capture_default_str()
                          ->transform(int64_text);
  bench_coll->add_option("--hosts", bc.hosts, "Hosts and their slots, e.g. h1:1,h2:1 (default: this machine)");
  bench_coll->add_option("--hostfile", bc.hostfile, "File of hosts (`host slots=N` per line), instead of --hosts");
  std::vector<std::string> bench_mca;
  bench_coll->add_option("--mca", bench_mca, "NAME=VALUE passed to mpirun as --mca NAME VALUE (repeatable)");
  bench_coll->add_option("--db", bc.db, "SQLite file to store into")->capture_default_str();
  double bench_lock_wait = 60.0;
  bench_coll->add_option("--lock-wait", bench_lock_wait, "Seconds a write waits for a db another process has locked")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  bench_coll->add_flag("--json", bc.json, "Print the results as JSON");
  bench_coll->add_option("--command-line", bc.command_line)->group("");

  std::string suite_file;
  std::filesystem::path suite_db = "results/trainscope.db";
  bool suite_json = false;
  auto* suite = app.add_subcommand("suite", "Run every entry of a suite file (TOML) into one db");
  suite->add_option("file", suite_file, "Suite file, e.g. suites/default.toml")->required();
  suite->add_option("--db", suite_db, "SQLite file to store into")->capture_default_str();
  suite->add_flag("--json", suite_json, "Print the summaries as JSON");

  std::filesystem::path import_from;
  std::filesystem::path import_db = "results/trainscope.db";
  auto* import_cmd = app.add_subcommand(
      "import", "Copy the runs of another trainscope db (a spill file, another machine's results) into a db");
  import_cmd->add_option("file", import_from, "trainscope db to copy from, e.g. results/trainscope.db.run7-1234.spill")
      ->required();
  import_cmd->add_option("--db", import_db, "SQLite file to copy into")->capture_default_str();

  bool list_json = false;
  auto* list = app.add_subcommand("list", "List workloads, presets and parameter counts");
  list->add_flag("--json", list_json, "JSON output");

  std::filesystem::path read_db = "results/trainscope.db";
  auto* runs = app.add_subcommand("runs", "List the runs in a db");
  runs->add_option("--db", read_db, "SQLite file")->capture_default_str();

  int64_t show_id = 0;
  bool show_json = false;
  auto* show = app.add_subcommand("show", "Print the summary of a stored run");
  show->add_option("run", show_id, "Run id (see `trainscope runs`)")->required();
  show->add_option("--db", read_db, "SQLite file")->capture_default_str();
  show->add_flag("--json", show_json, "JSON output");
  int64_t show_layers = -1;
  show->add_option("--layers", show_layers, "Also print the per-layer table: the N slowest layers (0: all)")
      ->expected(0, 1)
      ->default_str("0");

  int64_t export_id = 0;
  std::filesystem::path chrome_out;
  auto* exp = app.add_subcommand("export", "Write a stored run for other tools");
  exp->add_option("run", export_id, "Run id (see `trainscope runs`)")->required();
  exp->add_option("--db", read_db, "SQLite file")->capture_default_str();
  exp->add_option("--chrome", chrome_out,
                  "Chrome/Perfetto trace JSON of the run's CPU and GPU events (chrome://tracing, ui.perfetto.dev, "
                  "Holistic Trace Analysis)")
      ->required();

  ReportRequest report_request;
  auto* report = app.add_subcommand("report", "A suite report of stored runs: Markdown on stdout, or --html/--md/--json files");
  report->add_option("db", report_request.db, "SQLite file, e.g. results/trainscope.db")->required();
  report->add_option("selection", report_request.selectors, "Run ids, ranges A-B or suite names (default: every run)");
  report->add_option("--html", report_request.out.html, "Self-contained HTML report with charts");
  report->add_option("--md", report_request.out.markdown, "Markdown report (e.g. a CI job summary)");
  report->add_option("--json", report_request.out.json, "The report's figures as JSON");

  CompareRequest compare_request;
  compare_request.db = "results/trainscope.db";
  std::optional<double> fail_on_regression;
  auto* compare = app.add_subcommand("compare", "Compare two sets of runs (builds, commits, settings): deltas with 95% "
                                                "intervals, Mann-Whitney U, verdicts; a regression gate for CI");
  compare->add_option("base", compare_request.base, "A db file (all its runs), or run ids / ranges / a suite name in --db")->required();
  compare->add_option("new", compare_request.next, "The same, for the runs compared against base")->required();
  compare->add_option("--db", compare_request.db, "SQLite file the ids and suite names refer to")->capture_default_str();
  compare->add_option("--html", compare_request.out.html, "Self-contained HTML comparison with charts");
  compare->add_option("--md", compare_request.out.markdown, "Markdown comparison (e.g. $GITHUB_STEP_SUMMARY)");
  compare->add_option("--json", compare_request.out.json, "The comparison as JSON");
  compare->add_option("--fail-on-regression", fail_on_regression,
                      "Exit 1 when a configuration's throughput is significantly lower by more than PCT percent, or its "
                      "peak memory grew beyond --memory-tolerance");
  compare->add_option("--memory-tolerance", compare_request.memory_tolerance_pct,
                      "With --fail-on-regression: peak memory growth (percent) still accepted")
      ->capture_default_str();

  // a3c's game, to look at: a random episode as a PNG strip.
  PlayConfig play_config;
  auto* play = app.add_subcommand("play", "Play a3c's Breakout with random actions; write the frames as a PNG strip");
  play->add_option("--preset", play_config.preset, "Whose game: a3c's tiny | small | full")->capture_default_str();
  play->add_option("--seed", play_config.seed, "Game seed")->capture_default_str();
  play->add_option("--steps", play_config.steps, "At most this many agent steps")->capture_default_str();
  play->add_option("--every", play_config.every, "Keep every N-th frame")->capture_default_str();
  play->add_option("--per-row", play_config.per_row, "Frames per row")->capture_default_str();
  play->add_option("--out", play_config.out, "PNG file to write")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }

  try {
    if (*run) {
      if (*batch_opt) rc.batch = batch;
      rc.data_parallel.overlap = !no_overlap;
      rc.data_parallel.cross_barrier = !no_cross_barrier;
      rc.data_parallel.order =
          bucket_order == "arrival" ? ts::distributed::BucketOrder::arrival : ts::distributed::BucketOrder::reverse_registration;
      rc.mca = parse_mca(mca);
      if (!*nproc_opt && (!rc.hosts.empty() || !rc.hostfile.empty())) rc.nproc = 0;   // one rank per slot
      if (*learners_opt) rc.learners = learners;
      if (*quality_target_opt) rc.quality_target = quality_target;
      if (*strategy_opt) strategy_input.strategy = strategy;
      if (*servers_opt) strategy_input.servers = servers;
      if (*dedicated_opt) strategy_input.dedicated_servers = dedicated_servers;
      if (*server_hosts_opt) strategy_input.server_hosts = server_hosts;
      if (*ps_mode_opt) strategy_input.ps_mode = ps_mode;
      if (*staleness_opt) strategy_input.staleness = staleness;
      if (*chunk_mb_opt) strategy_input.chunk_mb = chunk_mb;
      for (const auto* o : {bucket_mb_opt, bucket_order_opt, no_overlap_opt, no_cross_barrier_opt, partition_mb_opt}) {
        if (*o) strategy_input.allreduce_only.push_back(o->get_name());
      }
      apply_strategy(strategy_input, rc);
      // CLI::Range lets NaN through (every comparison with it is false).
      if (!std::isfinite(flush_seconds) || !std::isfinite(lock_wait_seconds))
        throw UsageError("--flush-interval and --lock-wait must be numbers of seconds");
      rc.flush_interval = std::chrono::milliseconds(static_cast<int64_t>(flush_seconds * 1000));
      rc.lock_wait = std::chrono::milliseconds(static_cast<int64_t>(lock_wait_seconds * 1000));
      install_interrupt_handler();
      const RunOutcome out = execute_run(rc);
      // A rank other than 0 has no run to print; rank 0 of a `--nproc` launch leaves it to the launcher.
      if (out.run_id == 0 || (ts::distributed::launched_as_rank() && std::getenv("TS_LAUNCH_TOKEN"))) return out.exit_code;
      const auto summary = run_summary(rc.db, out.run_id);
      if (rc.json) {
        fmt::print("{}\n", summary.dump(2));
      } else {
        fmt::print("{}", format_summary(summary));
      }
      return out.exit_code;
    }
    if (*bench_coll) {
      bc.mca = parse_mca(bench_mca);
      if (!*bench_nproc && (!bc.hosts.empty() || !bc.hostfile.empty())) bc.nproc = 0;   // one rank per slot
      if (!std::isfinite(bench_lock_wait)) throw UsageError("--lock-wait must be a number of seconds");
      bc.lock_wait = std::chrono::milliseconds(static_cast<int64_t>(bench_lock_wait * 1000));
      install_interrupt_handler();
      return execute_collectives_bench(bc);
    }
    if (*suite) {
      const Suite s = load_suite(suite_file, suite_db);
      install_interrupt_handler();
      return run_suite(s, suite_json);
    }
    if (*report) return execute_report(report_request);
    if (*compare) {
      compare_request.fail_on_regression_pct = fail_on_regression;
      return execute_compare(compare_request);
    }
    if (*import_cmd) {
      fmt::print("{}", import_runs(import_from, import_db));
      return kExitOk;
    }
    if (*play) {
      fmt::print("{}\n", play_breakout(play_config));
      return kExitOk;
    }
    if (*list) {
      fmt::print("{}", list_json ? list_workloads_json().dump(2) + "\n" : format_workload_list());
      return kExitOk;
    }
    if (*runs) {
      fmt::print("{}", format_runs(read_db));
      return kExitOk;
    }
    if (*exp) {
      try {
        const auto stats = ts::reports::write_chrome_trace(read_db, export_id, chrome_out, [](int64_t done, int64_t total) {
          fmt::print(stderr, "\rtrainscope: exporting {}/{} events", done, total);
        });
        fmt::print(stderr, "\r");
        fmt::print("wrote {}: {} CPU events, {} GPU activities, {} launch flows, {} counter points\n",
                   chrome_out.string(), stats.cpu_events, stats.gpu_activities, stats.flows, stats.counters);
      } catch (const std::runtime_error& e) {  // a missing db or run, an unwritable path
        throw UsageError(e.what());
      }
      return kExitOk;
    }
    if (*show) {
      const auto summary = run_summary(read_db, show_id);
      fmt::print("{}", show_json ? summary.dump(2) + "\n" : format_summary(summary));
      if (show_layers >= 0) fmt::print("\n{}", format_layers(read_db, show_id, show_layers));
      return kExitOk;
    }
  } catch (const UsageError& e) {
    fmt::print(stderr, "trainscope: {}\n", e.what());
    return kExitBadInput;
  } catch (const ts::store::StoreError& e) {
    fmt::print(stderr, "trainscope: {}\n", e.what());
    return kExitBadInput;
  } catch (const ts::reports::OutputRefused& e) {  // an output path that would destroy something
    fmt::print(stderr, "trainscope: {}\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "trainscope: {}\n", e.what());
    return kExitRunFailed;
  }
  return kExitOk;
}
