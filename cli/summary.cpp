#include "cli/summary.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "cli/bench_command.h"
#include "cli/run_config.h"
#include "fmt/format.h"
#include "projection/ledger.h"
#include "reports/run_digest.h"
#include "store/error.h"
#include "store/liveness.h"
#include "store/reader.h"
#include "vocabulary/memory_category.h"

namespace ts::cli {

namespace {

// The digest's roofline (reports/run_digest.h) as `show --json` gives it; null when none.
nlohmann::json roofline_json(const std::optional<reports::Roofline>& roofline) {
  if (!roofline) return nullptr;
  nlohmann::json r = {{"iterations", roofline->iterations}, {"step_ms", roofline->step_ms}};
  if (const auto& m = roofline->machine) {
    r["machine"] = {{"threads", m->threads},
                    {"sgemm_gflops", m->sgemm_gflops},
                    {"sgemm_gflops_1t", m->sgemm_gflops_1t},
                    {"copy_gbps", m->copy_gbps},
                    {"copy_gbps_1t", m->copy_gbps_1t}};
  }
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : roofline->classes) {
    nlohmann::json row = {{"class", c.name}, {"ms", c.ms}, {"share", c.share}};
    const std::pair<const char*, const std::optional<double>&> optional_fields[] = {
        {"gflop", c.gflop}, {"gb", c.gb}, {"gflops", c.gflops}, {"gbps", c.gbps}, {"of_peak", c.of_peak}};
    for (const auto& [key, value] : optional_fields) {
      if (value) row[key] = *value;
    }
    classes.push_back(row);
  }
  r["classes"] = classes;
  return r;
}

// The first six of the digest's ops or kernels, as `show --json` gives them.
nlohmann::json top_json(const std::vector<reports::OpTotal>& ops) {
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(ops.size(), 6); ++i) {
    top.push_back(
        {{"op", ops[i].name},
         {"device", ops[i].device},
         {"count", ops[i].count},
         {"median_ms_per_iteration",
          ops[i].median_ms_per_iteration ? nlohmann::json(*ops[i].median_ms_per_iteration) : nlohmann::json()},
         {"total_ms", ops[i].total_ms},
         {"fraction", ops[i].fraction}});
  }
  return top;
}

// The machine's conditions and the digest's verdict on them (docs/formulas.md, "Measurement
// conditions"): what the summary's "conditions" line prints.
nlohmann::json conditions_json(const reports::Conditions& c) {
  const char* verdict = c.verdict == reports::Conditions::Verdict::clean   ? "clean"
                        : c.verdict == reports::Conditions::Verdict::noisy ? "noisy"
                                                                           : "unknown";
  nlohmann::json j = {{"verdict", verdict},
                      {"label", c.label()},
                      {"line", c.verdict_line()},
                      {"reasons", c.reasons},
                      {"figures", c.figures_line()}};
  return j;
}

// "; 2 of 30 timed iterations far slower (...)" where the digest found outliers, else "".
std::string outliers_text(const nlohmann::json& j) {
  if (!j.contains("iteration_outliers")) return "";
  const auto& o = j["iteration_outliers"];
  return fmt::format("; {} of {} far slower (beyond {:.1f} ms, Q3 + 3 IQR; slowest {:.1f} ms): they move means and "
                     "totals, not medians",
                     o["count"].get<int64_t>(), counted(o["of"].get<int64_t>(), "timed iteration"),
                     o["fence_ms"].get<double>(), o["slowest_ms"].get<double>());
}

// "  clocks         rank 1 +2.500000 s, drift +0.10 +- 0.02 ppm; ... (the ranks' times are set on rank
// 0's clock, good to 1.0 us)": the first four ranks, then how many more (the JSON has them all).
std::string clocks_text(const nlohmann::json& clocks) {
  std::string s = "  clocks         ";
  int64_t worst = 0;
  size_t shown = 0;
  for (const auto& c : clocks) {
    worst = std::max(worst, c["uncertainty_ns"].get<int64_t>());
    if (shown++ >= 4) continue;
    s += fmt::format("{}rank {} {:+.6f} s, drift {:+.2f} +- {:.2f} ppm", shown > 1 ? "; " : "",
                     c["rank"].get<int64_t>(), static_cast<double>(c["offset_ns"].get<int64_t>()) * 1e-9,
                     c["drift_ppm"].get<double>(), c["drift_uncertainty_ppm"].get<double>());
  }
  if (shown > 4) s += fmt::format("; {} more", shown - 4);
  return s + fmt::format(
                 "\n                 (against rank 0's; the ranks' times are set on its clock, good to {:.1f} us)\n",
                 static_cast<double>(worst) * 1e-3);
}

// Each rank's collectives: waiting for the last rank (skew) and moving data, per timed iteration,
// on rank 0's clock; then the rank the others waited for longest.
std::string collectives_split_text(const nlohmann::json& d) {
  const auto& split = d["collectives_split"];
  std::string s = fmt::format(
      "  collectives    waiting for the last rank vs moving data (ms per timed iteration, {} calls on rank 0's "
      "clock, good to {:.1f} us)\n    rank  waiting   moving  busbw moving  last in  others waited for it\n",
      split["calls"].get<int64_t>(), static_cast<double>(split["uncertainty_ns"].get<int64_t>()) * 1e-3);
  for (const auto& r : split["per_rank"]) {
    s += fmt::format("    {:>4} {:>8.2f} {:>8.2f} {:>8.3f} GB/s {:>8} {:>10.2f}\n", r["rank"].get<int64_t>(),
                     r["waiting_ms"].get<double>(), r["moving_ms"].get<double>(), r.value("moving_busbw_gbps", 0.0),
                     r["last_arrivals"].get<int64_t>(), r["others_waited_ms"].get<double>());
  }
  if (d.contains("straggler")) {
    const auto& st = d["straggler"];
    s += fmt::format("  straggler      rank {}: last to arrive in {} of {} calls; the others waited {:.2f} ms per "
                     "timed iteration for it\n",
                     st["rank"].get<int64_t>(), st["last_arrivals"].get<int64_t>(), split["calls"].get<int64_t>(),
                     st["others_waited_ms"].get<double>());
  }
  return s;
}

// One rank's interference (or the run's) as `show --json` gives it (reports::Interference).
nlohmann::json interference_row(const reports::Interference& f) {
  nlohmann::json row = {{"compute_ms", f.compute_ms},
                        {"disturbed_ms", f.disturbed_ms},
                        {"covered_ms", f.covered_ms},
                        {"unmeasured_ms", f.unmeasured_ms},
                        {"interference_ms", f.interference_ms},
                        {"jitter_ms", f.jitter_ms},
                        {"thin_ms", f.thin_ms},
                        {"covered_share", f.covered_share ? nlohmann::json(*f.covered_share) : nlohmann::json()},
                        {"share", f.share},
                        {"instances", f.instances},
                        {"disturbed_instances", f.disturbed_instances},
                        {"covered_instances", f.covered_instances},
                        {"thin_instances", f.thin_instances}};
  if (f.rank >= 0) {
    row["rank"] = f.rank;
    nlohmann::json top = nlohmann::json::array();
    for (const auto& o : f.top) {
      top.push_back({{"op", o.op},
                     {"interference_ms", o.interference_ms},
                     {"jitter_ms", o.jitter_ms},
                     {"reference_ms", o.reference_ms},
                     {"disturbed", o.disturbed},
                     {"undisturbed", o.undisturbed}});
    }
    row["top_ops"] = top;
  }
  return row;
}

// The digest's interference (per rank, then the run's) with what it means; null when none.
nlohmann::json interference_json(const std::vector<reports::Interference>& figures) {
  if (figures.empty()) return nullptr;
  nlohmann::json per_rank = nlohmann::json::array();
  nlohmann::json run;
  for (const auto& f : figures) {
    if (f.rank >= 0) per_rank.push_back(interference_row(f));
    else run = interference_row(f);
  }
  return {{"per_rank", per_rank},
          {"run", run},
          {"thin_reference", reports::kThinReference},
          {"meaning",
           "compute slowed while communication ran beside it on another thread: each op's self time against the "
           "median of its own instances with no communication beside them, the excess capped by the time under "
           "communication (docs/formulas.md, Interference). It is part of compute, not added to it; it also holds any "
           "other slowdown that coincides with communication (caches, memory bandwidth, the OS). jitter: what the "
           "same sum gives undisturbed instances (timing noise). unmeasured: time of ops never undisturbed, with no "
           "estimate"}};
}

// Each rank's interference and the run's (interference_json), what it means, the ops it slowed
// most, and how much of it rests on references that may be noise.
std::string interference_text(const nlohmann::json& in) {
  std::string s =
      "  interference   compute slowed by communication beside it (ms per timed iteration, part of compute):\n"
      "                 each op against its own instances with no communication beside them (docs/formulas.md)\n"
      "    rank  compute  under comm  measured  interference   jitter  unmeasured  covered   share\n";
  const auto row = [](const std::string& who, const nlohmann::json& r) {
    const std::string covered = r["covered_share"].is_null()
                                    ? std::string("-")
                                    : fmt::format("{:.0f}%", 100 * r["covered_share"].get<double>());
    return fmt::format("    {:>4} {:>8.2f} {:>11.2f} {:>9.2f} {:>13.2f} {:>8.2f} {:>11.2f} {:>8} {:>6.1f}%\n", who,
                       r["compute_ms"].get<double>(), r["disturbed_ms"].get<double>(), r["covered_ms"].get<double>(),
                       r["interference_ms"].get<double>(), r["jitter_ms"].get<double>(),
                       r["unmeasured_ms"].get<double>(), covered, 100 * r["share"].get<double>());
  };
  for (const auto& r : in["per_rank"]) s += row(std::to_string(r["rank"].get<int64_t>()), r);
  if (in["per_rank"].size() > 1 && !in["run"].is_null()) s += row("all", in["run"]);
  s += "                 measured: under comm with a reference; jitter: what timing noise alone gives them; "
       "unmeasured: ops\n                 never without comm beside them (no estimate, not none); it also holds "
       "other slowdowns\n                 that coincide with communication (caches, memory bandwidth, the OS)\n";
  for (const auto& r : in["per_rank"]) {
    if (r["top_ops"].empty()) continue;
    const auto& o = r["top_ops"].front();
    s +=
        fmt::format("    rank {} most slowed: {} +{:.3f} ms (reference {:.3f} ms from {} undisturbed, {} under comm)\n",
                    r["rank"].get<int64_t>(), o["op"].get<std::string>(), o["interference_ms"].get<double>(),
                    o["reference_ms"].get<double>(), o["undisturbed"].get<int64_t>(), o["disturbed"].get<int64_t>());
  }
  if (const auto& run = in["run"]; !run.is_null() && run["thin_ms"].get<double>() > 0) {
    s +=
        fmt::format("  may be noise   {:.2f} of the {:.2f} ms measured per timed iteration rest on references of fewer "
                    "than {} undisturbed instances\n",
                    run["thin_ms"].get<double>(), run["covered_ms"].get<double>(), in["thin_reference"].get<int64_t>());
  }
  return s;
}

// The run's throughput as every view shows it (docs/formulas.md, "Throughput"): the sustained
// headline in the workload's unit, its median per iteration in the same unit, and the other
// count's sustained rate (pairs beside tokens, tokens beside pairs) once.
nlohmann::json throughput_json(const reports::RunDigest& d) {
  const reports::RunFigures& f = d.figures;
  nlohmann::json j = nlohmann::json::object();
  if (f.sustained_headline) {
    j["sustained"] = f.sustained_headline->value;
    j["unit"] = f.sustained_headline->unit;
  }
  if (f.headline_per_iteration) {
    const auto& p = *f.headline_per_iteration;
    j["unit"] = p.unit;
    j["per_iteration"] = {{"median", p.median}, {"p10", p.p10}, {"p90", p.p90}};
  }
  if (const auto other = f.other_sustained()) j["other"] = {{"sustained", other->value}, {"unit", other->unit}};
  j["timed_iterations"] = f.timed_iterations;
  j["from_kept_iterations"] = f.from_kept_iterations;
  return j;
}

}  // namespace

namespace {

nlohmann::json ledger_row_json(const store::ProjectionRow& row) {
  nlohmann::json j{{"projection_run", row.run_id},    {"source_run", row.source_run_id},
                   {"sweep_run", row.sweep_run_id},   {"measured_run", row.measured_run_id},
                   {"strategy", row.strategy},        {"link", row.link},
                   {"projected_ns", row.projected_ns}};
  j["knobs"] = nlohmann::json::parse(row.knobs_json, nullptr, false);
  if (row.measured_ns > 0) j["measured_ns"] = row.measured_ns;
  if (row.error) j["error"] = *row.error;
  return j;
}

// A projection run's inputs and assumptions, or a measured run's own projections (the ledger's
// rows) or why it has none.
nlohmann::json projection_json(store::Reader& reader, const store::RunRow& run) {
  if (run.framework == "projection") {
    nlohmann::json j = nlohmann::json::object();
    if (const auto row = reader.projection_of(run.id)) j = ledger_row_json(*row);
    const auto cfg = nlohmann::json::parse(run.config_json, nullptr, false);
    if (cfg.is_object() && cfg.contains("projection")) {
      const auto& p = cfg["projection"];
      if (p.contains("assumptions")) j["assumptions"] = p["assumptions"];
      if (p.contains("link") && p["link"].contains("source")) j["link_model"] = p["link"]["source"];
    }
    return j;
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& row : reader.projections_of_measured(run.id)) list.push_back(ledger_row_json(row));
  nlohmann::json j{{"ledger", list}};
  if (list.empty() && run.status == store::RunStatus::completed) {
    const auto knobs = projection::knobs_of(reader, run);
    if (!knobs.knobs) {
      j["why_none"] = knobs.why_not;
    } else if (!projection::find_source(reader, run)) {
      j["why_none"] = fmt::format("no one-rank run of {} {} with {} threads and batch {} before it (trainscope run {} "
                                  "--preset {} --threads {} --shard 0/{})",
                                  run.workload, run.preset, run.threads, run.batch_size, run.workload, run.preset,
                                  run.threads, run.ranks);
    } else if (!projection::find_sweep(reader, run)) {
      j["why_none"] = "no collectives sweep over the same hosts before it (trainscope bench collectives --hosts ...)";
    } else {
      j["why_none"] = "its inputs are in the db, but it was stored before they were (trainscope project ... --against)";
    }
  }
  return j;
}

std::string format_projection(const nlohmann::json& j, const std::string& framework) {
  const auto ms = [](double ns) { return fmt::format("{:.1f} ms", ns / 1e6); };
  std::string s;
  if (framework == "projection") {
    if (!j.contains("source_run")) return "  projection     (its ledger row is missing)\n";
    const int64_t ranks = j.contains("knobs") && j["knobs"].is_object() ? j["knobs"].value("ranks", int64_t{0}) : 0;
    const int64_t measured = j.value("measured_run", int64_t{0});
    s += fmt::format("  projection     of run {} onto {} ranks over {}{}\n", j["source_run"].get<int64_t>(), ranks,
                     j.value("link_model", j.value("link", std::string("?"))),
                     measured > 0 ? fmt::format("; measured run {}", measured) : "");
    if (j.contains("error")) {
      s += fmt::format("  projected      {} per iteration, measured {}: error {:+.1f}%\n",
                       ms(j["projected_ns"].get<double>()), ms(j["measured_ns"].get<double>()),
                       100 * j["error"].get<double>());
    }
    if (j.contains("assumptions")) {
      for (const auto& a : j["assumptions"]) s += "  assumes        " + a.get<std::string>() + "\n";
    }
    return s;
  }
  for (const auto& row : j.value("ledger", nlohmann::json::array())) {
    s += fmt::format("  projected      {} per iteration by run {} (from run {}, sweep {}){}\n",
                     ms(row["projected_ns"].get<double>()), row["projection_run"].get<int64_t>(),
                     row["source_run"].get<int64_t>(), row["sweep_run"].get<int64_t>(),
                     row.contains("error")
                         ? fmt::format(": error {:+.1f}% against this run's {}", 100 * row["error"].get<double>(),
                                       ms(row["measured_ns"].get<double>()))
                         : "");
  }
  if (j.contains("why_none")) s += "  projected      none: " + j["why_none"].get<std::string>() + "\n";
  return s;
}

}  // namespace

nlohmann::json run_summary(const std::filesystem::path& db, int64_t run_id) {
  std::optional<store::Reader> reader;
  try {
    reader.emplace(db);
  } catch (const store::StoreError& e) {
    throw UsageError(e.what());
  }
  const auto run = reader->run(run_id);
  if (!run) throw UsageError(fmt::format("run {} not found in {}", run_id, db.string()));
  nlohmann::json j;
  j["db"] = std::filesystem::absolute(db).string();
  j["run_id"] = run->id;
  j["workload"] = run->workload;
  j["preset"] = run->preset;
  j["device"] = run->device;
  j["batch_size"] = run->batch_size;
  // What the batch counts (a token budget, rollout steps...), from the run's stored config.
  if (const auto cfg = nlohmann::json::parse(run->config_json, nullptr, false);
      cfg.is_object() && cfg.contains("units") && cfg["units"].contains("batch")) {
    j["batch_unit"] = cfg["units"]["batch"];
  }
  j["threads"] = run->threads;
  j["framework"] = run->framework;
  // A projection (issue 44): what it was made from; a measured multi-rank run: its own, with the
  // error, or why it has none.
  if (run->framework == "projection" || run->ranks > 1) j["projection"] = projection_json(*reader, *run);
  // An imported trace (issue 42): where from, and what it does not hold (absent, never zero).
  if (run->framework != "trainscope" && run->framework != "projection") {
    nlohmann::json imported;
    for (const auto& e : reader->environment(run_id)) {
      if (e.key == "imported_from") imported["from"] = e.value;
      if (e.key == "trace_format") imported["format"] = e.value;
      if (e.key == "absent") imported["absent"] = e.value;
    }
    j["imported"] = imported;
  }
  // A run left `running` by a process that is gone is `lost`: it keeps what it flushed.
  const store::LivenessVerdict alive = store::liveness(*run);
  j["status"] = store::status_label(*run, alive);
  j["liveness"] = {{"state", std::string(store::to_string(alive.state))},
                   {"why", alive.why},
                   {"heartbeat_ms", run->heartbeat_ms},
                   {"host", run->host},
                   {"pid", run->pid}};
  j["started_at"] = run->started_at;
  j["ended_at"] = run->ended_at;
  j["error"] = run->error;
  j["trace"] = run->trace;

  nlohmann::json metrics = nlohmann::json::object(), units = nlohmann::json::object();
  for (const auto& m : reader->metrics(run_id)) {
    if (m.iteration >= 0) continue;
    metrics[m.name] = m.value;
    if (!m.unit.empty()) units[m.name] = m.unit;
  }
  j["units"] = units;
  // A collectives benchmark (`bench collectives`) is no training run: its table is all it has.
  if (run->workload == "collectives") {
    j["metrics"] = metrics;
    j["ranks"] = run->ranks;
    j["collective_bench"] =
        collective_bench_rows_json(reader->collective_bench(run_id), reader->collective_bench_samples(run_id),
                                   metrics.value(std::string(kTcpRateMetric), 0.0));
    return j;
  }
  // Every figure below is the digest's (reports/run_digest.h), as the report and the viewer
  // print them; a run that never reached its final write gets its rates from the iterations it
  // kept there.
  const reports::RunDigest digest = reports::digest_run(*reader, db, *run, vocabulary::tbd_class_of);
  const reports::RunFigures& fig = digest.figures;
  const auto kept_iterations = reader->iterations(run_id);
  const auto kept_timed =
      std::count_if(kept_iterations.begin(), kept_iterations.end(), [](const auto& it) { return !it.warmup; });
  j["kept"] = {{"iterations", static_cast<int64_t>(kept_iterations.size())},
               {"timed_iterations", static_cast<int64_t>(kept_timed)},
               {"events", reader->event_count(run_id)}};
  if (fig.from_kept_iterations) {
    metrics["throughput_median"] = fig.samples_per_iteration->median;
    metrics["throughput_p10"] = fig.samples_per_iteration->p10;
    metrics["throughput_p90"] = fig.samples_per_iteration->p90;
    metrics["timed_iterations"] = static_cast<double>(fig.timed_iterations);
    metrics["iteration_time_median"] = fig.iteration_ms_median.value_or(0);
    j["kept"]["throughput_from_kept_iterations"] = true;
  }
  j["metrics"] = metrics;
  j["throughput"] = throughput_json(digest);
  if (const auto& o = digest.outliers) {
    j["iteration_outliers"] = {
        {"count", o->count}, {"of", o->of}, {"fence_ms", o->fence_ms}, {"slowest_ms", o->slowest_ms}};
  }
  j["conditions"] = conditions_json(digest.conditions);

  // Phase breakdown: median per timed iteration.
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& p : digest.phases) {
    phases.push_back({{"phase", p.phase}, {"median_ms", p.median_ms}, {"share", p.share}});
  }
  j["phases"] = phases;
  if (digest.unaccounted_median_ms) {
    j["phases_unaccounted"] = {{"median_ms", *digest.unaccounted_median_ms}, {"share", digest.unaccounted_share}};
  }

  // Distributed runs: each rank's communication breakdown (medians over its timed iterations)
  // and which rank is slowest; the job's throughput is every rank's samples.
  if (run->ranks > 1) {
    nlohmann::json per_rank = nlohmann::json::array();
    std::map<int64_t, int64_t> events;
    for (const auto& [r, n] : reader->event_counts_by_rank(run_id)) events[r] = n;
    for (const auto& b : digest.breakdown) {
      per_rank.push_back({{"rank", b.rank},
                          {"events", events[b.rank]},
                          {"iteration_ms", b.iteration_ms},
                          {"compute_ms", b.compute_ms},
                          {"comm_ms", b.comm_ms},
                          {"overlap_ms", b.overlap_ms},
                          {"exposed_comm_ms", b.exposed_comm_ms},
                          {"idle_ms", b.idle_ms},
                          {"gradient_wait_ms", b.gradient_wait_ms}});
    }
    // Interference beside each rank's breakdown (ms per timed iteration; null: not measured).
    for (auto& row : per_rank) {
      row["interference_ms"] = nullptr;
      for (const auto& f : digest.interference) {
        if (f.rank == row["rank"].get<int64_t>()) row["interference_ms"] = f.interference_ms;
      }
    }
    j["distributed"] = {{"ranks", run->ranks},
                        {"global_batch_size", run->global_batch_size},
                        {"per_rank", per_rank},
                        {"slowest_rank", digest.slowest_rank()}};
    if (const auto job = digest.job_median_per_iteration()) j["distributed"]["throughput_all_ranks_median"] = *job;
    if (const auto job = digest.job_sustained()) j["distributed"]["throughput_all_ranks"] = *job;
    j["distributed"]["throughput_unit"] = digest.unit;
    j["distributed"]["interference"] = interference_json(digest.interference);
    // Each rank's clock against rank 0's (v11): what the ranks' times were set side by side with.
    nlohmann::json clocks = nlohmann::json::array();
    for (const auto& [rank, m] : digest.clocks.models()) {
      clocks.push_back({{"rank", rank},
                        {"offset_ns", m.offset_ns},
                        {"drift_ppm", m.drift * 1e6},
                        {"drift_uncertainty_ppm", m.drift_uncertainty * 1e6},
                        {"uncertainty_ns", m.uncertainty_ns}});
    }
    if (!clocks.empty()) j["distributed"]["clocks"] = clocks;
    // Each rank's collectives split into waiting for the last rank and moving data (issue 41).
    if (!digest.wait_move.empty()) {
      nlohmann::json split = nlohmann::json::array();
      for (const auto& w : digest.wait_move) {
        split.push_back({{"rank", w.rank},
                         {"waiting_ms", w.waiting_ms},
                         {"moving_ms", w.moving_ms},
                         {"moving_busbw_gbps", w.moving_busbw_gbps},
                         {"last_arrivals", w.last_arrivals},
                         {"others_waited_ms", w.others_waited_ms}});
      }
      j["distributed"]["collectives_split"] = {{"per_rank", split},
                                               {"calls", digest.split_calls},
                                               {"incomplete_calls", digest.incomplete_calls},
                                               {"uncertainty_ns", digest.wait_move_uncertainty_ns}};
      if (const auto* s = digest.straggler()) {
        j["distributed"]["straggler"] = {
            {"rank", s->rank}, {"last_arrivals", s->last_arrivals}, {"others_waited_ms", s->others_waited_ms}};
      }
    }
  }

  nlohmann::json memory = nlohmann::json::array();
  for (const auto& m : digest.memory) {
    memory.push_back({{"category", m.category},
                      {"tbd_class", m.tbd_class},
                      {"bytes", m.bytes},
                      {"fraction", digest.share_of_peak(m.bytes)}});
  }
  j["memory_at_peak"] = memory;
  j["memory_peak_bytes"] = digest.peak_bytes;

  // The six largest CPU ops and GPU kernels, the step's roofline and each GPU's time: the digest's.
  j["top_ops"] = top_json(digest.ops);
  j["top_kernels"] = top_json(digest.kernels);
  j["roofline"] = roofline_json(digest.roofline);
  // Several ranks: each rank's GPU with its rank and overlap (a single process's entries as before).
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : digest.gpus) {
    gpus.push_back({{"device", g.device},
                    {"busy_fraction", g.busy_fraction},
                    {"span_ms", g.span_ms},
                    {"compute_ms", g.compute_ms},
                    {"comm_ms", g.comm_ms},
                    {"exposed_comm_ms", g.exposed_comm_ms},
                    {"memcpy_ms", g.memcpy_ms},
                    {"memset_ms", g.memset_ms},
                    {"idle_ms", g.idle_ms}});
    if (run->ranks > 1) {
      gpus.back()["rank"] = g.rank;
      gpus.back()["overlap_ms"] = g.overlap_ms.value_or(0.0);
    }
  }
  j["gpu"] = gpus;
  if (const reports::GpuTime* busiest = digest.busiest_gpu(); busiest && j.contains("distributed")) {
    j["distributed"]["busiest_gpu"] = {{"rank", busiest->rank}, {"device", busiest->device}};
  }
  return j;
}

namespace {
// Each rank's GPU time (runs of several ranks), a row per rank and device as the per-rank
// breakdown prints its rows, and the GPU that computes longest.
std::string format_gpus_per_rank(const nlohmann::json& j) {
  std::string s = "  GPU per rank (ms per timed iteration)\n";
  s += "    rank  device    busy     span  compute     comm  overlap  exposed   memcpy   memset     idle\n";
  for (const auto& g : j["gpu"]) {
    s += fmt::format(
        "    {:>4}  {:<7} {:>5.1f}% {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f}\n",
        g["rank"].get<int64_t>(), g["device"].get<std::string>(), 100 * g["busy_fraction"].get<double>(),
        g["span_ms"].get<double>(), g["compute_ms"].get<double>(), g["comm_ms"].get<double>(),
        g["overlap_ms"].get<double>(), g["exposed_comm_ms"].get<double>(), g["memcpy_ms"].get<double>(),
        g["memset_ms"].get<double>(), g["idle_ms"].get<double>());
  }
  if (j.contains("distributed") && j["distributed"].contains("busiest_gpu")) {
    const auto& b = j["distributed"]["busiest_gpu"];
    s += fmt::format("  busiest GPU    rank {} ({}): the most compute per timed iteration\n", b["rank"].get<int64_t>(),
                     b["device"].get<std::string>());
  }
  return s;
}
}  // namespace

std::string format_roofline(const nlohmann::json& r) {
  std::string s = fmt::format("  roofline       {:.1f} ms of thread time per timed iteration, by what limits each op "
                              "(docs/formulas.md)\n",
                              r["step_ms"].get<double>());
  if (r.contains("machine")) {
    const auto& m = r["machine"];
    s += fmt::format("    machine      SGEMM {:.1f} GFLOP/s on {} ({:.1f} on 1), copy {:.1f} GB/s ({:.1f} on 1)\n",
                     m["sgemm_gflops"].get<double>(), counted(std::llround(m["threads"].get<double>()), "thread"),
                     m["sgemm_gflops_1t"].get<double>(), m["copy_gbps"].get<double>(), m["copy_gbps_1t"].get<double>());
  } else {
    s += "    machine      not measured (run with --roofline for the fractions of its peaks)\n";
  }
  static const std::map<std::string, std::string> kLabel = {{"compute", "compute"},  {"memory", "memory"},
                                                            {"reorder", "reorders"}, {"other", "other ops"},
                                                            {"data", "data"},        {"overhead", "overhead"}};
  for (const auto& c : r["classes"]) {
    const std::string cls = c["class"].get<std::string>();
    s += fmt::format("    {:<10} {:>9.1f} ms {:>6.1f}%", kLabel.at(cls), c["ms"].get<double>(),
                     100 * c["share"].get<double>());
    if (cls == "compute" && c.contains("gflops")) {
      s += fmt::format("  {:>8.2f} GFLOP  {:>7.1f} GFLOP/s", c["gflop"].get<double>(), c["gflops"].get<double>());
    } else if ((cls == "memory" || cls == "reorder") && c.contains("gbps")) {
      s += fmt::format("  {:>8.3f} GB     {:>7.1f} GB/s   ", c["gb"].get<double>(), c["gbps"].get<double>());
    }
    if (c.contains("of_peak")) {
      s += fmt::format("  {:>4.0f}% of {}", 100 * c["of_peak"].get<double>(), cls == "compute" ? "SGEMM" : "copy");
    }
    if (cls == "overhead") s += "  (between ops, autograd's bookkeeping, the loop)";
    if (cls == "other") s += "  (not modelled: CTC, RoI)";
    s += "\n";
  }
  return s;
}

std::string format_summary(const nlohmann::json& j) {
  std::string s;
  auto metric = [&](const char* name) -> double {
    return j["metrics"].contains(name) ? j["metrics"][name].get<double>() : 0.0;
  };
  s += fmt::format(
      "run {}  {}/{} on {}  batch {}{}  {}  [{}]\n", j["run_id"].get<int64_t>(), j["workload"].get<std::string>(),
      j["preset"].get<std::string>(), j["device"].get<std::string>(), j["batch_size"].get<int64_t>(),
      j.contains("batch_unit") ? " " + units_for(j["batch_size"].get<int64_t>(), j["batch_unit"].get<std::string>())
                               : "",
      counted(j["threads"].get<int64_t>(), "thread"), j["status"].get<std::string>());
  if (!j["error"].get<std::string>().empty()) s += "  error: " + j["error"].get<std::string>() + "\n";
  if (j.contains("projection")) s += format_projection(j["projection"], j["framework"].get<std::string>());
  if (j.contains("imported")) {
    const auto& im = j["imported"];
    s += fmt::format("  imported       {} ({}) from {}\n", j["framework"].get<std::string>(),
                     im.value("format", std::string("trace")), im.value("from", std::string("?")));
    if (im.contains("absent")) s += fmt::format("  absent         {}\n", im["absent"].get<std::string>());
  }
  if (j.contains("collective_bench")) {
    s += fmt::format("  {}, {} per size; time: mean per call averaged over the ranks\n",
                     counted(j["ranks"].get<int64_t>(), "rank"),
                     counted(j["collective_bench"].empty() ? 0 : j["collective_bench"][0]["iterations"].get<int64_t>(),
                             "timed call"));
    const bool tcp = j["metrics"].contains(std::string(kTcpRateMetric));
    if (tcp) {
      s += fmt::format("  the link's TCP rate: {:.3f} GB/s (%tcp: busbw / it)\n",
                       j["metrics"][std::string(kTcpRateMetric)].get<double>());
    }
    s += format_collective_bench_header(tcp);
    for (const auto& r : j["collective_bench"]) s += format_collective_bench_row(r) + "\n";
    s += format_collective_bench_spread(j["collective_bench"]);
    s += fmt::format("  stored in {} as run {}\n", j["db"].get<std::string>(), j["run_id"].get<int64_t>());
    return s;
  }
  if (j.contains("liveness") && j["liveness"]["state"] != "finished") {
    const auto& kept = j["kept"];
    s += fmt::format("  {:<14} {} ({}); kept {} ({} timed) and {} so far\n", j["status"].get<std::string>(),
                     j["liveness"]["state"] == "live"      ? "still being written"
                     : j["liveness"]["state"] == "stalled" ? "not advancing"
                                                           : "not finished",
                     j["liveness"]["why"].get<std::string>(), counted(kept["iterations"].get<int64_t>(), "iteration"),
                     kept["timed_iterations"].get<int64_t>(), counted(kept["events"].get<int64_t>(), "event"));
  }
  // A run that ended before its final write has no parameter count stored.
  if (j["metrics"].contains("parameter_count")) {
    s += fmt::format("  parameters     {}\n", with_commas(static_cast<int64_t>(metric("parameter_count"))));
  }
  const auto unit = [&](const char* name, const char* otherwise) {
    return j.contains("units") && j["units"].contains(name) ? j["units"][name].get<std::string>()
                                                            : std::string(otherwise);
  };
  // The throughput as throughput_json() put it: one unit, the sustained rate first.
  if (j.contains("throughput") && j["throughput"].contains("per_iteration")) {
    const auto& t = j["throughput"];
    const auto& p = t["per_iteration"];
    const std::string rate_unit = t["unit"].get<std::string>();
    const std::string timed = counted(t["timed_iterations"].get<int64_t>(), "timed iteration");
    // What a token or frame is, said where its rate is printed.
    const auto what_counts = [&](const std::string& u) -> std::string {
      if (u != unit("tokens_per_s", "-")) return "";
      return u.starts_with("frames") ? " (unpadded spectrogram frames)" : " (unpadded source + target tokens)";
    };
    if (t.contains("sustained")) {
      s += fmt::format("  throughput     {:.2f} {} sustained over {}{}\n", t["sustained"].get<double>(), rate_unit,
                       timed, what_counts(rate_unit));
      s += fmt::format("                 per iteration: median {:.2f} (p10 {:.2f}, p90 {:.2f})\n",
                       p["median"].get<double>(), p["p10"].get<double>(), p["p90"].get<double>());
    } else {  // a run cut short before its final write, or stored before the sustained rate
      s += fmt::format("  throughput     {:.2f} {} median per iteration over {} (p10 {:.2f}, p90 {:.2f}; no "
                       "sustained rate: {})\n",
                       p["median"].get<double>(), rate_unit, timed, p["p10"].get<double>(), p["p90"].get<double>(),
                       j.contains("imported")                  ? "an imported trace: not every step's work is known"
                       : t["from_kept_iterations"].get<bool>() ? "the run did not reach its final write"
                                                               : "stored before there was one");
    }
    if (t.contains("other")) {
      const std::string other_unit = t["other"]["unit"].get<std::string>();
      s += fmt::format("                 also {:.2f} {} sustained{}\n", t["other"]["sustained"].get<double>(),
                       other_unit, what_counts(other_unit));
    }
    // A PyTorch reference's same iterations run first without its profiler (cli/pytorch_reference.h).
    if (j["metrics"].contains("unprofiled_headline_throughput"))
      s += fmt::format("  unprofiled     {:.2f} {} sustained: the same iterations without PyTorch's profiler, run "
                       "first\n",
                       metric("unprofiled_headline_throughput"), unit("unprofiled_headline_throughput", "-"));
    if (j["metrics"].contains("iteration_time_median"))
      s += fmt::format("  iteration      {:.1f} ms median{}\n", metric("iteration_time_median"), outliers_text(j));
  }
  // Whether the machine gave the run what it asked for (the digest's verdict), and the figures.
  if (j.contains("conditions")) {
    const auto& c = j["conditions"];
    s += fmt::format("  conditions     {}\n", c["line"].get<std::string>());
    if (!c["figures"].get<std::string>().empty())
      s += fmt::format("                 {}\n", c["figures"].get<std::string>());
  }
  if (j.contains("distributed")) {
    const auto& d = j["distributed"];
    s += fmt::format("  ranks          {} data parallel, global batch {}", d["ranks"].get<int64_t>(),
                     d["global_batch_size"].get<int64_t>());
    if (d.contains("throughput_all_ranks")) {
      // Rank 0's sustained rate times the ranks (reports::RunDigest::job_sustained).
      s += fmt::format("; all ranks {:.2f} {} sustained (the rates above are rank 0's)",
                       d["throughput_all_ranks"].get<double>(), d["throughput_unit"].get<std::string>());
    } else if (d.contains("throughput_all_ranks_median")) {
      s += fmt::format("; all ranks {:.2f} {} median per iteration (the rates above are rank 0's)",
                       d["throughput_all_ranks_median"].get<double>(), d["throughput_unit"].get<std::string>());
    }
    if (d["per_rank"].empty()) {
      s += "\n  per rank       no breakdown (written at the end of a run, which this one did not reach)\n";
    } else {
      s += "\n  per rank (median ms per timed iteration)\n";
      s += "    rank  iteration  compute     comm  overlap  exposed     idle  grad wait   events\n";
    }
    for (const auto& r : d["per_rank"]) {
      s += fmt::format("    {:>4} {:>10.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>10.2f} {:>8}\n",
                       r["rank"].get<int64_t>(), r["iteration_ms"].get<double>(), r["compute_ms"].get<double>(),
                       r["comm_ms"].get<double>(), r["overlap_ms"].get<double>(), r["exposed_comm_ms"].get<double>(),
                       r["idle_ms"].get<double>(), r["gradient_wait_ms"].get<double>(), r["events"].get<int64_t>());
    }
    if (d["slowest_rank"].get<int64_t>() >= 0)
      s += fmt::format("  slowest rank   {}\n", d["slowest_rank"].get<int64_t>());
    if (d.contains("interference") && !d["interference"].is_null()) s += interference_text(d["interference"]);
    if (d.contains("clocks")) s += clocks_text(d["clocks"]);
    if (d.contains("collectives_split")) s += collectives_split_text(d);
  }
  if (j["metrics"].contains("loss_first")) {
    s += fmt::format("  loss           {:.4f} -> {:.4f}\n", metric("loss_first"), metric("loss_last"));
  }
  if (j["metrics"].contains("accuracy"))
    s += fmt::format("  accuracy       {:.1f}% (held-out)\n", 100 * metric("accuracy"));
  if (j["metrics"].contains("bleu")) s += fmt::format("  BLEU           {:.2f} (held-out, greedy)\n", metric("bleu"));
  if (j["metrics"].contains("quality_target")) {  // --eval-every with --quality-target
    s +=
        j["metrics"].contains("time_to_quality_s")
            ? fmt::format("  to quality     {:.2f} s of training ({}) to reach {:g}\n", metric("time_to_quality_s"),
                          counted(std::llround(metric("iterations_to_quality")), "iteration"), metric("quality_target"))
            : fmt::format("  to quality     {:g} not reached in any evaluation\n", metric("quality_target"));
  }
  if (j["metrics"].contains("image_stat_distance")) {
    s += fmt::format("  image stats    {:.4f} distance to held-out images (lower is better)\n",
                     metric("image_stat_distance"));
  }
  if (!j["phases"].empty()) {
    s += "  phases (median ms per iteration; share of the timed iterations' time)\n";
    for (const auto& p : j["phases"]) {
      s += fmt::format("    {:<11} {:>8.1f} ms  {:>5.1f}%\n", p["phase"].get<std::string>(),
                       p["median_ms"].get<double>(), 100 * p["share"].get<double>());
    }
    if (j.contains("phases_unaccounted")) {
      const auto& u = j["phases_unaccounted"];
      s += fmt::format("    {:<11} {:>8.1f} ms  {:>5.1f}%  (in no phase: the loop between them)\n", "unaccounted",
                       u["median_ms"].get<double>(), 100 * u["share"].get<double>());
    }
  }
  if (!j["memory_at_peak"].empty()) {
    s += fmt::format("  memory at peak {} (by category)\n",
                     human_bytes(static_cast<double>(j["memory_peak_bytes"].get<int64_t>())));
    for (const auto& m : j["memory_at_peak"]) {
      s += fmt::format("    {:<17} {:>11}  {:>5.1f}%  ({})\n", m["category"].get<std::string>(),
                       human_bytes(static_cast<double>(m["bytes"].get<int64_t>())), 100 * m["fraction"].get<double>(),
                       m["tbd_class"].get<std::string>());
    }
  }
  if (j["metrics"].contains("rss_peak_bytes")) {
    // Each figure where the run stored it (an imported PyTorch run has the peak over the process
    // before its model, not the growth during the run).
    std::vector<std::string> parts = {"peak " + human_bytes(metric("rss_peak_bytes"))};
    if (j["metrics"].contains("rss_growth_bytes"))
      parts.push_back("grew " + human_bytes(metric("rss_growth_bytes")) + " during the run");
    if (j["metrics"].contains("rss_peak_growth_bytes"))
      parts.push_back(human_bytes(metric("rss_peak_growth_bytes")) + " over the process before the model");
    s += fmt::format("  process RSS    {}\n", fmt::join(parts, ", "));
  }
  if (!j["gpu"].empty() && j["gpu"].front().contains("rank")) {
    s += format_gpus_per_rank(j);
  }
  for (const auto& g : j["gpu"]) {
    if (g.contains("rank")) continue;  // in the table above
    s += fmt::format(
        "  GPU {:<10} busy {:.1f}% of {:.2f} ms per iteration: compute {:.2f}, comm {:.2f} (exposed {:.2f}), "
        "memcpy {:.2f}, memset {:.2f}, idle {:.2f} ms\n",
        g["device"].get<std::string>(), 100 * g["busy_fraction"].get<double>(), g["span_ms"].get<double>(),
        g["compute_ms"].get<double>(), g["comm_ms"].get<double>(), g["exposed_comm_ms"].get<double>(),
        g["memcpy_ms"].get<double>(), g["memset_ms"].get<double>(), g["idle_ms"].get<double>());
  }
  if (j["metrics"].contains("gpu_dropped_records")) {
    const auto dropped = static_cast<int64_t>(metric("gpu_dropped_records"));
    // Runs stored before the count was kept have no gpu_incomplete_records: nothing is said of them.
    std::string incomplete;
    if (j["metrics"].contains("gpu_incomplete_records")) {
      const auto n = static_cast<int64_t>(metric("gpu_incomplete_records"));
      incomplete = n == 0
                       ? ", no incomplete records"
                       : fmt::format(", WARNING: {} INCOMPLETE (no time from CUPTI), left out", counted(n, "record"));
    }
    s += fmt::format("  GPU trace      {}, {} outside ops, {}{}\n",
                     counted(static_cast<int64_t>(metric("gpu_activities")), "activity", "activities"),
                     counted(static_cast<int64_t>(metric("gpu_unattributed_launches")), "launch", "launches"),
                     dropped == 0 ? std::string("no dropped records")
                                  : fmt::format("WARNING: {} DROPPED by CUPTI", counted(dropped, "record")),
                     incomplete);
  }
  {  // docs/formulas.md, "GPU trace checks"; each stored only when it had something to check
    const auto pct = [](double f) { return fmt::format("{:.3g}%", 100 * f); };
    std::vector<std::string> checks;
    if (j["metrics"].contains("gpu_trace_kernels_before_launch")) {
      const double before = metric("gpu_trace_kernels_before_launch");
      checks.push_back(fmt::format("{} of device work starts before its launch{}", pct(before),
                                   before > 0 ? " (WARNING: one clock, must be 0)" : ""));
    }
    if (j["metrics"].contains("gpu_trace_outside_iteration")) {
      const double outside = metric("gpu_trace_outside_iteration");
      checks.push_back(fmt::format("{} outside its iteration{}", pct(outside), outside > 0 ? " (WARNING)" : ""));
    }
    if (j["metrics"].contains("gpu_trace_event_diff_max")) {
      checks.push_back(fmt::format("CUPTI against CUDA events per iteration: max {}, median {}",
                                   pct(metric("gpu_trace_event_diff_max")),
                                   pct(metric("gpu_trace_event_diff_median"))));
    }
    if (!checks.empty()) s += fmt::format("  GPU checks     {}\n", fmt::join(checks, "; "));
  }
  if (!j["top_kernels"].empty()) {
    s += "  top GPU kernels (timed iterations)\n";
    for (const auto& o : j["top_kernels"]) {
      std::string name = o["op"].get<std::string>();
      if (name.size() > 60) name = name.substr(0, 57) + "...";
      s += fmt::format("    {:<60} {:>7} {:<5} {:>10.2f} ms  {:>5.1f}%\n", name, o["count"].get<int64_t>(),
                       plural(o["count"].get<int64_t>(), "call"), o["total_ms"].get<double>(),
                       100 * o["fraction"].get<double>());
    }
  }
  if (j.contains("roofline") && !j["roofline"].is_null()) s += format_roofline(j["roofline"]);
  if (!j["top_ops"].empty()) {
    // Ranked by a typical iteration's time where the run stored it (docs/formulas.md, "Rankings").
    const bool medians = !j["top_ops"].front()["median_ms_per_iteration"].is_null();
    s += medians ? "  top ops (self time: median per timed iteration, total over them, share)\n"
                 : "  top ops (timed iterations, self time)\n";
    for (const auto& o : j["top_ops"]) {
      s += fmt::format("    {:<28} {:>7} {:<5} ", o["op"].get<std::string>(), o["count"].get<int64_t>(),
                       plural(o["count"].get<int64_t>(), "call"));
      if (medians) s += fmt::format("{:>9.3f} ms/it ", o["median_ms_per_iteration"].get<double>());
      s += fmt::format("{:>10.1f} ms  {:>5.1f}%\n", o["total_ms"].get<double>(), 100 * o["fraction"].get<double>());
    }
  }
  s += fmt::format("  stored in {} as run {}\n", j["db"].get<std::string>(), j["run_id"].get<int64_t>());
  return s;
}

namespace {

// The run's `limit` slowest layers (0: all), slowest first as every view ranks them.
std::vector<store::LayerRow> slowest_layers(const std::filesystem::path& db, int64_t run_id, int64_t limit) {
  std::optional<store::Reader> reader;
  try {
    reader.emplace(db);
  } catch (const store::StoreError& e) {
    throw UsageError(e.what());
  }
  if (!reader->run(run_id)) throw UsageError(fmt::format("run {} not found in {}", run_id, db.string()));
  auto layers = reader->layers(run_id);
  reports::rank_layer_rows(layers);
  if (limit > 0 && static_cast<int64_t>(layers.size()) > limit) layers.resize(static_cast<size_t>(limit));
  return layers;
}

// GPU runs add the device time each layer's ops launched.
bool has_gpu_time(const std::vector<store::LayerRow>& layers) {
  return std::any_of(layers.begin(), layers.end(),
                     [](const store::LayerRow& l) { return l.gpu_forward_ns > 0 || l.gpu_backward_ns > 0; });
}

}  // namespace

nlohmann::json layers_json(const std::filesystem::path& db, int64_t run_id, int64_t limit) {
  const auto layers = slowest_layers(db, run_id, limit);
  const bool gpu = has_gpu_time(layers);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : layers) {
    nlohmann::json row = {
        {"layer", l.layer},
        {"median_ms_per_iteration",
         l.median_per_iteration_ns >= 0 ? nlohmann::json(l.median_per_iteration_ns * 1e-6) : nlohmann::json()},
        {"forward_ms", l.forward_ns * 1e-6},
        {"backward_ms", l.backward_ns * 1e-6},
        {"activation_bytes", l.activation_bytes},
        {"parameters", l.parameter_count},
        {"ops", l.op_types}};
    if (gpu) {
      row["gpu_forward_ms"] = l.gpu_forward_ns * 1e-6;
      row["gpu_backward_ms"] = l.gpu_backward_ns * 1e-6;
    }
    out.push_back(row);
  }
  return out;
}

std::string format_layers(const std::filesystem::path& db, int64_t run_id, int64_t limit) {
  const auto layers = slowest_layers(db, run_id, limit);
  const bool gpu = has_gpu_time(layers);
  // Slowest first by the median (docs/formulas.md, "Rankings"); fwd and bwd are the means.
  std::string s =
      fmt::format("{:<32} {:>10} {:>10} {:>10} ", "layer (per timed iteration)", "median ms", "fwd ms", "bwd ms");
  if (gpu) s += fmt::format("{:>10} {:>10} ", "gpu fwd ms", "gpu bwd ms");
  s += fmt::format("{:>12} {:>12}  {}\n", "activations", "parameters", "ops");
  for (const auto& l : layers) {
    s += fmt::format("{:<32} {:>10} {:>10.3f} {:>10.3f} ", l.layer,
                     l.median_per_iteration_ns >= 0 ? fmt::format("{:.3f}", l.median_per_iteration_ns * 1e-6) : "-",
                     l.forward_ns * 1e-6, l.backward_ns * 1e-6);
    if (gpu) s += fmt::format("{:>10.3f} {:>10.3f} ", l.gpu_forward_ns * 1e-6, l.gpu_backward_ns * 1e-6);
    s += fmt::format("{:>12} {:>12}  {}\n", human_bytes(static_cast<double>(l.activation_bytes)),
                     with_commas(l.parameter_count), l.op_types);
  }
  return s;
}

std::string format_runs(const std::filesystem::path& db, const std::vector<int64_t>& only) {
  std::optional<store::Reader> reader;
  try {
    reader.emplace(db);
  } catch (const store::StoreError& e) {
    throw UsageError(e.what());
  }
  std::string s =
      fmt::format("{:>4}  {:<20}  {:<12} {:<6} {:<6} {:>6} {:>6}  {:<11}  {:<10}  {:>14}\n", "id", "started",
                  "workload", "preset", "device", "batch", "iters", "status", "conditions", "sustained rate");
  // Who and when we are, read once: liveness compares every running run with them.
  const store::ProcessIdentity here = store::current_process();
  const int64_t now_ms = store::unix_time_ms();
  std::vector<store::RunRow> rows;
  if (only.empty()) {
    rows = reader->runs();
  } else {
    for (const int64_t id : only) {
      if (auto row = reader->run(id)) rows.push_back(std::move(*row));
    }
  }
  for (const auto& r : rows) {
    // The headline rate in its unit, sustained; a run stored before it had one: the median per
    // iteration, labelled so. Only what the run stored (no query of its iterations per row).
    const auto listed = reports::read_run_figures(*reader, r.id, reports::KeptIterations::ignore).listed();
    const double tp = listed ? listed->rate.value : 0;
    std::string unit = listed ? listed->rate.unit : "samples/s";
    if (listed && !listed->sustained) unit += " (median per iteration)";
    std::string status = store::status_label(r, store::liveness(r, here, now_ms));
    if (r.status == store::RunStatus::running) {  // how far it got: its streamed iterations
      status += fmt::format(" {}/{}", reader->iteration_count(r.id), r.warmup + r.iterations);
    }
    // A collectives benchmark trains nothing: no samples/s (`show` prints its table); a run that
    // stored no rate (cut short, an imported trace) has none: "-", never 0.
    const bool no_rate = r.workload == "collectives" || !listed;
    const std::string rate = no_rate ? "-" : fmt::format("{:.2f}", tp);
    // The digest's verdict on the machine's conditions ("unknown": none recorded; `show` has the reasons).
    std::string conditions = "-";
    if (r.workload != "collectives") {
      const auto c = reports::read_conditions(*reader, r.id);
      conditions = c.verdict == reports::Conditions::Verdict::unknown ? "unknown" : c.label();
    }
    s += fmt::format("{:>4}  {:<20}  {:<12} {:<6} {:<6} {:>6} {:>6}  {:<11}  {:<10}  {:>14} {}\n", r.id, r.started_at,
                     r.workload, r.preset, r.device, r.batch_size, r.iterations, status, conditions, rate,
                     no_rate ? "" : unit);
  }
  return s;
}

}  // namespace ts::cli
