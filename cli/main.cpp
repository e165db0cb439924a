// trainscope: train a workload, profile it, store it; list, inspect and compare what is stored.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>

#include "cli/bench_command.h"
#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/import_command.h"
#include "cli/interrupts.h"
#include "cli/list.h"
#include "cli/openmp_waiting.h"
#include "cli/play.h"
#include "cli/progress.h"
#include "cli/project_command.h"
#include "cli/report_command.h"
#include "cli/run_command.h"
#include "cli/run_flags.h"
#include "cli/suite.h"
#include "cli/summary.h"
#include "distributed/mpi_runtime.h"
#include "fmt/format.h"
#include "reports/chrome_trace.h"
#include "reports/output_file.h"
#include "store/error.h"

using namespace ts::cli;

namespace {

// The --force of every command that writes output files (reports/output_file.h, Replace).
constexpr const char* kForceHelp = "Replace an existing output file that trainscope did not write (or a SQLite file)";

std::string join_args(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed terminal or pipe ends the output, never the run (cli/console.h).
  detach_from_console_signals();
  // Before anything else: it may start the process again (cli/openmp_waiting.h).
  settle_openmp_waiting(argc, argv);
  CLI::App app{"trainscope: benchmark and profile DNN training (time and memory), stored in SQLite"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("trainscope 0.1.0"));

  // Every argument ends up in JSON (the stored command line, names, paths): UTF-8 or refused.
  for (int i = 1; i < argc; ++i) {
    try {
      check_utf8(argv[i], fmt::format("argument {}", i));
    } catch (const UsageError& e) {
      say(stderr, "trainscope: {}\n", e.what());
      return kExitBadInput;
    }
  }
  const std::string command_line = join_args(argc, argv);
  auto* run = app.add_subcommand("run", "Train WORKLOAD, profile it and store the run");
  // Every option of a run is declared once, in session/run_options.cpp.
  const RunFlags run_flags(*run);
  // Whole decimal numbers that fit, or exit 2 (check_int64_text).
  const CLI::Validator int64_text(check_int64_text, "");

  // The collectives benchmark (docs/distributed.md, "Collectives benchmark").
  CollectivesBenchConfig bc;
  bc.command_line = command_line;
  auto* bench = app.add_subcommand("bench", "Benchmarks of the machine itself, outside training");
  bench->require_subcommand(1);
  auto* bench_coll = bench->add_subcommand(
      "collectives", "Time all-reduce, broadcast, all-gather, reduce-scatter and barrier over N ranks, as nccl-tests");
  bench_coll->add_option("--backend", bc.backend, "mpi (host memory) | nccl (GPU memory; CUDA builds)")
      ->capture_default_str();
  bench_coll
      ->add_option("--collectives", bc.collectives,
                   "Which, comma separated: all_reduce,broadcast,all_gather,reduce_scatter,barrier (default: all)")
      ->delimiter(',');
  bench_coll->add_option("--min-bytes", bc.min_bytes, "Smallest size (B, K, M, G: binary multiples)")
      ->capture_default_str();
  bench_coll->add_option("--max-bytes", bc.max_bytes, "Largest size")->capture_default_str();
  bench_coll->add_option("--factor", bc.factor, "Each size is the previous one times this")
      ->capture_default_str()
      ->transform(int64_text);
  bench_coll->add_option("--iters", bc.iterations, "Timed calls per size")
      ->capture_default_str()
      ->transform(int64_text);
  bench_coll->add_option("--warmup", bc.warmup, "Untimed calls per size before them")
      ->capture_default_str()
      ->transform(int64_text);
  bench_coll
      ->add_option(
          "--timeout", bc.timeout_s,
          "Seconds the whole sweep may take (0: no limit); past it the run fails, timed out, keeping the sizes "
          "measured, and the command exits 5")
      ->capture_default_str();
  bench_coll
      ->add_option("--tcp-seconds", bc.tcp_seconds,
                   "Ranks on two hosts or more: seconds of one TCP stream from rank 0's host to the next host, the "
                   "link's rate busbw is set against (0: not measured)")
      ->capture_default_str();
  // --nproc, --hosts, --hostfile, --mca, --db, --lock-wait and --json are run's (session/run_options.cpp).
  const RunFlags bench_shared(*bench_coll, collectives_bench_shared_options(), bc.shared);
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

  TraceImportRequest trace_import;
  auto* import_trace_cmd = app.add_subcommand(
      "import-trace",
      "Read a PyTorch profiler trace (Kineto's Chrome trace JSON, .json or .json.gz) or an Nsight Systems SQLite "
      "export into a db as a run");
  import_trace_cmd
      ->add_option("file", trace_import.trace,
                   "the trace, e.g. from prof.export_chrome_trace(...), or nsys export --type sqlite")
      ->required();
  import_trace_cmd->add_option("--db", trace_import.db, "SQLite file to store into")->capture_default_str();
  import_trace_cmd->add_option("--workload", trace_import.workload,
                               "what the run is called (default: the file's name)");
  import_trace_cmd->add_option("--preset", trace_import.preset, "the preset or size it ran")->capture_default_str();
  import_trace_cmd->add_option("--batch", trace_import.batch, "samples per step (0: unknown, no throughput)")
      ->capture_default_str();
  import_trace_cmd
      ->add_option("--warmup", trace_import.warmup, "the first N steps are warm-up, left out of the figures")
      ->capture_default_str();
  import_trace_cmd->add_option("--memory-timeline", trace_import.memory_timeline,
                               "PyTorch's memory timeline of the same profile (prof.export_memory_timeline(\"m.json\", "
                               "device)): the memory by category");

  bool list_json = false;
  auto* list = app.add_subcommand("list", "List workloads, presets and parameter counts");
  list->add_flag("--json", list_json, "JSON output");

  std::filesystem::path read_db = "results/trainscope.db";
  auto* runs = app.add_subcommand("runs", "List the runs in a db");
  runs->add_option("--db", read_db, "SQLite file")->capture_default_str();

  int64_t show_id = 0;
  bool show_json = false;
  auto* show = app.add_subcommand("show", "Print the summary of a stored run");
  // Run ids and counts: whole decimal numbers in range, or exit 2 (check_run_id_text).
  const CLI::Validator run_id_text(check_run_id_text, ""), count_text(check_count_text, "");
  show->add_option("run", show_id, "Run id (see `trainscope runs`)")->required()->transform(run_id_text);
  show->add_option("--db", read_db, "SQLite file")->capture_default_str();
  show->add_flag("--json", show_json, "JSON output");
  int64_t show_layers = -1;
  show->add_option("--layers", show_layers, "Also print the per-layer table: the N slowest layers (0: all)")
      ->expected(0, 1)
      ->default_str("0")
      ->transform(count_text);

  int64_t export_id = 0;
  std::filesystem::path chrome_out;
  auto* exp = app.add_subcommand("export", "Write a stored run for other tools");
  exp->add_option("run", export_id, "Run id (see `trainscope runs`)")->required()->transform(run_id_text);
  exp->add_option("--db", read_db, "SQLite file")->capture_default_str();
  exp->add_option("--chrome", chrome_out,
                  "Chrome/Perfetto trace JSON of the run's CPU and GPU events (chrome://tracing, ui.perfetto.dev, "
                  "Holistic Trace Analysis)")
      ->required();
  bool export_force = false;
  exp->add_flag("--force", export_force, kForceHelp);

  ReportRequest report_request;
  auto* report =
      app.add_subcommand("report", "A suite report of stored runs: Markdown on stdout, or --html/--md/--json files");
  report->add_option("db", report_request.db, "SQLite file, e.g. results/trainscope.db")->required();
  report->add_option("selection", report_request.selectors, "Run ids, ranges A-B or suite names (default: every run)");
  report->add_option("--html", report_request.out.html, "Self-contained HTML report with charts");
  report->add_option("--md", report_request.out.markdown, "Markdown report (e.g. a CI job summary)");
  report->add_option("--json", report_request.out.json, "The report's figures as JSON");
  report->add_flag("--force", report_request.out.force, kForceHelp);

  CompareRequest compare_request;
  compare_request.db = "results/trainscope.db";
  std::optional<double> fail_on_regression;
  auto* compare = app.add_subcommand("compare", "Compare two sets of runs (builds, commits, settings): deltas with 95% "
                                                "intervals, Mann-Whitney U, verdicts; a regression gate for CI");
  compare
      ->add_option("base", compare_request.base, "A db file (all its runs), or run ids / ranges / a suite name in --db")
      ->required();
  compare->add_option("new", compare_request.next, "The same, for the runs compared against base")->required();
  compare->add_option("--db", compare_request.db, "SQLite file the ids and suite names refer to")
      ->capture_default_str();
  compare->add_option("--html", compare_request.out.html, "Self-contained HTML comparison with charts");
  compare->add_option("--md", compare_request.out.markdown, "Markdown comparison (e.g. $GITHUB_STEP_SUMMARY)");
  compare->add_option("--json", compare_request.out.json, "The comparison as JSON");
  compare->add_flag("--force", compare_request.out.force, kForceHelp);
  compare->add_option(
      "--fail-on-regression", fail_on_regression,
      "Exit 1 when a configuration's throughput is significantly lower by more than PCT percent, or its "
      "peak memory grew beyond --memory-tolerance");
  compare
      ->add_option("--memory-tolerance", compare_request.memory_tolerance_pct,
                   "With --fail-on-regression: peak memory growth (percent) still accepted")
      ->capture_default_str();

  // What N ranks would make of a one-rank run (docs/projection.md), and the error ledger.
  ProjectRequest project_request;
  auto* project = app.add_subcommand(
      "project", "Project a stored one-rank run onto N ranks over a link (all-reduce or parameter server), store it");
  project->add_option("run", project_request.run, "The one-rank run (see `trainscope runs`)")
      ->required()
      ->transform(run_id_text);
  project->add_option("--db", project_request.db, "SQLite file")->capture_default_str();
  project->add_option("--ranks", project_request.ranks, "Ranks, one per host")->capture_default_str();
  project->add_option("--link", project_request.link,
                      "The link's rate (tc units: 100mbit, 1gbit, 10gbit): the newest sweep whose TCP rate matches, "
                      "else a nominal link");
  project
      ->add_option("--sweep", project_request.sweep,
                   "A collectives benchmark run (bench collectives) to fit the link to")
      ->transform(run_id_text);
  project->add_option("--strategy", project_request.strategy, "allreduce | ps (one server on worker 0; --ps-mode)")
      ->capture_default_str();
  project->add_option("--bucket-mb", project_request.bucket_mb, "Gradient bucket size, MiB")->capture_default_str();
  project->add_flag("--no-overlap", project_request.no_overlap, "All-reduce only after backward");
  project->add_option("--bucket-order", project_request.bucket_order, "arrival | reverse_registration")
      ->capture_default_str();
  project->add_flag("--priority", project_request.priority,
                    "Priority schedule: partitions, the front-most ready first; with cross-barrier where the "
                    "workload's step can be cut per parameter, as run takes it");
  project->add_option("--partition-mb", project_request.partition_mb, "With --priority: partition size, MiB")
      ->capture_default_str();
  project->add_flag("--no-cross-barrier", project_request.no_cross_barrier,
                    "With --priority: the backward's end waits for every bucket");
  project->add_option("--chunk-mb", project_request.chunk_mb, "Parameter server: key (chunk) size, MiB")
      ->capture_default_str();
  project->add_option("--ps-mode", project_request.ps_mode,
                      "Parameter server: sync (the default) | async | bounded (--staleness) | eager, as run takes it");
  project->add_option("--staleness", project_request.staleness,
                      "With --ps-mode bounded: the most pushes a worker may run ahead of the slowest (0)");
  project
      ->add_option("--cores-per-rank", project_request.cores_per_rank,
                   "Cores each rank has (ranks sharing a machine share its cores); 0: its threads and one more, "
                   "so that communication takes nothing from compute")
      ->capture_default_str();
  project
      ->add_option("--against", project_request.against,
                   "A measured run of these ranks and knobs: its error is stored in the ledger")
      ->transform(run_id_text);
  project->add_flag("--json", project_request.json, "JSON output");

  bool projections_json = false;
  auto* projections = app.add_subcommand("projections", "The error ledger: every stored projection and its error");
  projections->add_option("--db", read_db, "SQLite file")->capture_default_str();
  projections->add_flag("--json", projections_json, "JSON output");

  // a3c's game, to look at: a random episode as a PNG strip.
  PlayConfig play_config;
  auto* play = app.add_subcommand("play", "Play a3c's Breakout with random actions; write the frames as a PNG strip");
  play->add_option("--preset", play_config.preset, "Whose game: a3c's tiny | small | full")->capture_default_str();
  play->add_option("--seed", play_config.seed, "Game seed")->capture_default_str();
  play->add_option("--steps", play_config.steps, "At most this many agent steps")->capture_default_str();
  play->add_option("--every", play_config.every, "Keep every N-th frame")->capture_default_str();
  play->add_option("--per-row", play_config.per_row, "Frames per row")->capture_default_str();
  play->add_option("--out", play_config.out, "PNG file to write")->capture_default_str();
  play->add_flag("--force", play_config.force, kForceHelp);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }

  try {
    if (*run) {
      const RunConfig rc = run_flags.config(command_line);
      install_interrupt_handler();
      const RunOutcome out = execute_run(rc);
      // A rank other than 0 has no run to print; rank 0 of a `--nproc` launch leaves it to the launcher.
      if (out.run_id == 0 || (ts::distributed::launched_as_rank() && std::getenv("TS_LAUNCH_TOKEN")))
        return out.exit_code;
      const auto summary = stored_summary(rc.db, out);
      if (rc.json) {
        say("{}\n", summary.dump(2));
      } else {
        say("{}", format_summary(summary));
      }
      return out.exit_code;
    }
    if (*bench_coll) {
      bc.shared = bench_shared.config(command_line);
      install_interrupt_handler();
      return execute_collectives_bench(bc);
    }
    if (*suite) {
      const Suite s = load_suite(suite_file, suite_db);
      install_interrupt_handler();
      return run_suite(s, suite_json);
    }
    if (*report) return execute_report(report_request);
    if (*project) {
      project_request.command_line = command_line;
      return execute_project(project_request);
    }
    if (*projections) return execute_projections(read_db, projections_json);
    if (*compare) {
      compare_request.fail_on_regression_pct = fail_on_regression;
      return execute_compare(compare_request);
    }
    if (*import_cmd) {
      say("{}", import_runs(import_from, import_db));
      return kExitOk;
    }
    if (*import_trace_cmd) {
      trace_import.command_line = command_line;
      say("{}", import_trace(trace_import));
      return kExitOk;
    }
    if (*play) {
      say("{}\n", play_breakout(play_config));
      return kExitOk;
    }
    if (*list) {
      say("{}", list_json ? list_workloads_json().dump(2) + "\n" : format_workload_list());
      return kExitOk;
    }
    if (*runs) {
      say("{}", format_runs(read_db));
      return kExitOk;
    }
    if (*exp) {
      try {
        CountProgress progress("trainscope: exported", "event");
        const auto stats = ts::reports::write_chrome_trace(
            read_db, export_id, chrome_out, [&](int64_t done, int64_t total) { progress.update(done, total); },
            export_force ? ts::reports::Replace::anything : ts::reports::Replace::ours_only);
        progress.finish();
        say("wrote {}: {}, {}, {}, {}\n", chrome_out.string(), counted(stats.cpu_events, "CPU event"),
            counted(stats.gpu_activities, "GPU activity", "GPU activities"), counted(stats.flows, "launch flow"),
            counted(stats.counters, "counter point"));
      } catch (const std::runtime_error& e) {  // a missing db or run, an unwritable path
        throw UsageError(e.what());
      }
      return kExitOk;
    }
    if (*show) {
      auto summary = run_summary(read_db, show_id);
      if (show_json) {
        // One document: the layers asked for go inside it, not after it.
        if (show_layers >= 0) summary["layers"] = layers_json(read_db, show_id, show_layers);
        say("{}\n", summary.dump(2));
        return kExitOk;
      }
      say("{}", format_summary(summary));
      if (show_layers >= 0) say("\n{}", format_layers(read_db, show_id, show_layers));
      return kExitOk;
    }
  } catch (const UsageError& e) {
    say(stderr, "trainscope: {}\n", e.what());
    return kExitBadInput;
  } catch (const ts::store::StoreError& e) {
    say(stderr, "trainscope: {}\n", e.what());
    return kExitBadInput;
  } catch (const ts::reports::OutputRefused& e) {  // an output path that would destroy something
    say(stderr, "trainscope: {}\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    say(stderr, "trainscope: {}\n", e.what());
    return kExitRunFailed;
  }
  return kExitOk;
}
