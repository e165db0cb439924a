#include "cli/project_command.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/run_config.h"
#include "projection/ledger.h"
#include "projection/link_model.h"
#include "projection/simulate.h"
#include "projection/source_run.h"
#include "reports/number_format.h"
#include "store/reader.h"
#include "store/writer.h"
#include "vocabulary/ps_mode.h"
#include "vocabulary/rates.h"

namespace ts::cli {

namespace {

using projection::Knobs;
using projection::Strategy;

// A sweep whose measured TCP rate is within this share of the rate asked for is taken as its link.
constexpr double kSweepRateTolerance = 0.25;

Knobs knobs_of(const ProjectRequest& r) {
  if (r.ranks < 2 || r.ranks > 100000) throw UsageError(fmt::format("--ranks {}: give 2 or more", r.ranks));
  if (r.strategy != "allreduce" && r.strategy != "ps")
    throw UsageError("--strategy " + r.strategy + ": allreduce or ps");
  if (r.bucket_order != "arrival" && r.bucket_order != "reverse_registration")
    throw UsageError("--bucket-order " + r.bucket_order + ": arrival or reverse_registration");
  for (const auto& [name, v] : {std::pair{"--bucket-mb", r.bucket_mb}, std::pair{"--partition-mb", r.partition_mb},
                                std::pair{"--chunk-mb", r.chunk_mb}}) {
    if (!(v > 0) || v > 1e6) throw UsageError(fmt::format("{} {}: give a size above 0 MiB", name, v));
  }
  Knobs k;
  k.strategy = r.strategy == "ps" ? Strategy::ps : Strategy::allreduce;
  k.ranks = r.ranks;
  k.bucket_mb = r.bucket_mb;
  k.overlap = !r.no_overlap;
  k.arrival_order = r.bucket_order == "arrival";
  k.priority = r.priority && k.strategy == Strategy::allreduce;
  k.ps_priority = r.priority && k.strategy == Strategy::ps;
  k.partition_mb = r.partition_mb;
  k.cross_barrier = !r.no_cross_barrier;
  k.chunk_mb = r.chunk_mb;
  // As run takes them: a bound on staleness asks for bounded staleness.
  const std::string mode_text = !r.ps_mode.empty() ? r.ps_mode : r.staleness >= 0 ? "bounded" : "sync";
  const auto mode = vocabulary::parse_ps_mode(mode_text);
  if (!mode) throw UsageError("--ps-mode " + r.ps_mode + ": sync, async, bounded or eager");
  if (k.strategy != Strategy::ps && (*mode != vocabulary::PsMode::sync || r.staleness >= 0))
    throw UsageError("--ps-mode and --staleness need --strategy ps");
  if (r.staleness >= 0 && *mode != vocabulary::PsMode::bounded)
    throw UsageError(
        fmt::format("--staleness {} applies to --ps-mode bounded only (got --ps-mode {})", r.staleness, mode_text));
  if (r.staleness > 1'000'000) throw UsageError(fmt::format("--staleness {}: 0 to 1000000", r.staleness));
  k.ps_mode = *mode;
  k.staleness = std::max<int64_t>(0, r.staleness);
  if (r.cores_per_rank < 0 || r.cores_per_rank > 1e5)
    throw UsageError(
        fmt::format("--cores-per-rank {}: give a count of cores (0: a core more than the threads)", r.cores_per_rank));
  k.cores_per_rank = r.cores_per_rank;
  return k;
}

// The sweep for --link RATE: the newest collectives run whose measured TCP rate is within
// kSweepRateTolerance of one TCP stream's share of the rate.
std::optional<int64_t> sweep_at_rate(store::Reader& reader, double bits_per_s) {
  const double expected_gbps = projection::nominal_link(bits_per_s).p2p_gbps;
  std::optional<int64_t> best;
  for (const auto& r : reader.runs()) {
    if (r.workload != "collectives" || r.status == store::RunStatus::running) continue;
    for (const auto& m : reader.metrics(r.id)) {
      if (m.name == "tcp_rate_gbps" && std::abs(m.value / expected_gbps - 1) <= kSweepRateTolerance) best = r.id;
    }
  }
  return best;
}

std::string ms(double ns) { return fmt::format("{:.1f} ms", ns / 1e6); }

std::string knobs_text(const Knobs& k) {
  if (k.strategy == Strategy::ps) {
    const std::string mode = k.ps_mode == vocabulary::PsMode::bounded
                                 ? fmt::format("bounded (staleness {})", k.staleness)
                                 : std::string(vocabulary::to_string(k.ps_mode));
    return fmt::format("parameter server, {}, 1 server on worker 0, {:g} MiB keys", mode, k.chunk_mb);
  }
  std::string s = k.priority ? fmt::format("all-reduce, priority in {:g} MiB partitions", k.partition_mb)
                             : fmt::format("all-reduce, {:g} MiB buckets ({} order)", k.bucket_mb,
                                           k.arrival_order ? "arrival" : "reverse registration");
  s += k.overlap ? ", overlapped with backward" : ", after backward (no overlap)";
  if (k.priority) s += k.cross_barrier ? ", cross-barrier" : ", no cross-barrier";
  return s;
}

std::string format_projection(const projection::SourceRun& source, const projection::Projection& p, int64_t run,
                              const std::optional<store::ProjectionRow>& row) {
  std::string out = fmt::format("projection run {}: run {} ({} {}, {}, batch {} per rank) onto {} ranks\n", run,
                                source.run.id, source.run.workload, source.run.preset,
                                reports::counted(source.run.threads, "thread"), source.run.batch_size, p.knobs.ranks);
  out += fmt::format("  strategy    {}\n", knobs_text(p.knobs));
  out += fmt::format("  link        {}\n", p.link.source);
  const auto med = [&](double projection::ProjectedIteration::*f, int rank) { return p.median(f, rank); };
  const int shown = p.knobs.strategy == Strategy::ps ? static_cast<int>(std::min<int64_t>(p.knobs.ranks, 2)) : 1;
  out += "\n  per iteration (medians)   source   ";
  for (int r = 0; r < shown; ++r) out += shown > 1 ? fmt::format("  projected rank {}", r) : "  projected";
  out += "\n";
  const double source_ns = projection::median_span_ns(source);
  const auto line = [&](const char* name, double projection::ProjectedIteration::*f, std::optional<double> src) {
    out += fmt::format("  {:<24} {:>10}", name, src ? ms(*src) : "-");
    for (int r = 0; r < shown; ++r) out += fmt::format("  {:>16}", ms(med(f, r)));
    out += "\n";
  };
  line("iteration", &projection::ProjectedIteration::span_ns, source_ns);
  line("compute", &projection::ProjectedIteration::compute_ns, std::nullopt);
  line("comm", &projection::ProjectedIteration::comm_ns, std::nullopt);
  line("overlap", &projection::ProjectedIteration::overlap_ns, std::nullopt);
  line("exposed comm", &projection::ProjectedIteration::exposed_ns, std::nullopt);
  line("idle", &projection::ProjectedIteration::idle_ns, std::nullopt);
  line(p.knobs.strategy == Strategy::ps ? "pull and push waits" : "gradient wait",
       &projection::ProjectedIteration::wait_ns, std::nullopt);
  int64_t total = 0;
  for (int64_t b : p.bucket_bytes) total += b;
  out += fmt::format("\n  {} of {:.1f} MiB in all",
                     reports::counted(static_cast<int64_t>(p.bucket_bytes.size()),
                                      p.knobs.strategy == Strategy::ps ? "key" : "bucket"),
                     static_cast<double>(total) / 1048576.0);
  const double projected = p.median_span_ns;
  if (projected > 0 && source_ns > 0) {
    out += fmt::format("; scaling efficiency {:.0f}% (the source's iteration over the projected one)\n",
                       100.0 * source_ns / projected);
  } else {
    out += "\n";
  }
  if (row && row->measured_run_id > 0 && row->error) {
    out += fmt::format("  measured    run {}: {} per iteration; projection error {:+.1f}%\n", row->measured_run_id,
                       ms(row->measured_ns), 100.0 * *row->error);
  }
  out += "  assumes     " + p.assumptions.front() + "\n";
  for (size_t i = 1; i < p.assumptions.size(); ++i) out += "              " + p.assumptions[i] + "\n";
  return out;
}

}  // namespace

int execute_project(const ProjectRequest& r) {
  const Knobs knobs = knobs_of(r);
  if (r.link.empty() && r.sweep == 0)
    throw UsageError("give the link: --link RATE (e.g. 1gbit; a sweep measured at about that rate is used when the db "
                     "has one) or --sweep RUN");
  std::optional<double> rate;
  if (!r.link.empty()) {
    rate = projection::parse_link_rate(r.link);
    if (!rate) throw UsageError("--link " + r.link + ": a rate in tc's units, e.g. 100mbit, 1gbit, 10gbit");
  }
  store::Reader reader(r.db);
  projection::SourceRun source;
  try {
    source = projection::read_source(reader, r.run, projection::needs_forward_uses(knobs));
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  int64_t sweep = r.sweep;
  if (sweep == 0 && rate) sweep = sweep_at_rate(reader, *rate).value_or(0);
  projection::LinkModel link;
  try {
    if (sweep > 0) {
      link = projection::load_link_model(reader, sweep);
    } else {
      link = projection::nominal_link(*rate);
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  std::optional<double> measured_ns;
  if (r.against > 0) {
    const auto measured = reader.run(r.against);
    if (!measured) throw UsageError(fmt::format("--against {}: no such run", r.against));
    if (measured->workload != source.run.workload || measured->preset != source.run.preset)
      throw UsageError(fmt::format("--against {}: it trained {} {}, the source {} {}", r.against, measured->workload,
                                   measured->preset, source.run.workload, source.run.preset));
    if (measured->ranks != r.ranks)
      throw UsageError(
          fmt::format("--against {}: it ran {} ranks, the projection {}", r.against, measured->ranks, r.ranks));
    measured_ns = projection::median_iteration_ns(reader, r.against);
    if (!measured_ns) throw UsageError(fmt::format("--against {}: it has no timed iterations", r.against));
  }
  projection::Projection p;
  try {
    p = projection::project(source, link, knobs);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  store::Writer writer(r.db);
  const int64_t run =
      projection::store_projection(writer, source, p,
                                   {sweep, r.against, measured_ns.value_or(-1),
                                    r.link.empty() ? fmt::format("sweep {}", sweep) : r.link, r.command_line});
  const auto row = store::Reader(r.db).projection_of(run);
  if (r.json) {
    nlohmann::json j{{"db", r.db.string()},
                     {"projection_run", run},
                     {"source_run", source.run.id},
                     {"sweep_run", sweep},
                     {"knobs", nlohmann::json::parse(projection::knobs_json(p.knobs))},
                     {"link", p.link.source},
                     {"source_iteration_ns", projection::median_span_ns(source)},
                     {"projected_iteration_ns", p.median_span_ns},
                     {"compute_ns", p.median(&projection::ProjectedIteration::compute_ns)},
                     {"comm_ns", p.median(&projection::ProjectedIteration::comm_ns)},
                     {"overlap_ns", p.median(&projection::ProjectedIteration::overlap_ns)},
                     {"exposed_comm_ns", p.median(&projection::ProjectedIteration::exposed_ns)},
                     {"idle_ns", p.median(&projection::ProjectedIteration::idle_ns)},
                     {"wait_ns", p.median(&projection::ProjectedIteration::wait_ns)},
                     {"buckets_bytes", p.bucket_bytes},
                     {"assumptions", p.assumptions}};
    if (row && row->error) {
      j["measured_run"] = row->measured_run_id;
      j["measured_iteration_ns"] = row->measured_ns;
      j["error"] = *row->error;
    }
    say("{}\n", j.dump(2));
  } else {
    say("{}", format_projection(source, p, run, row));
  }
  return kExitOk;
}

int execute_projections(const std::filesystem::path& db, bool json) {
  store::Reader reader(db);
  const auto rows = reader.projections();
  std::vector<double> errors;
  nlohmann::json list = nlohmann::json::array();
  std::string table =
      fmt::format("{:>5} {:>5} {:>6} {:>5} {:>8}  {:<14} {:<10} {:>5}  {:<12} {:>12} {:>12} {:>8}\n", "proj", "src",
                  "sweep", "meas", "strategy", "workload", "preset", "ranks", "link", "projected", "measured", "error");
  for (const auto& row : rows) {
    const auto run = reader.run(row.run_id);
    const std::string workload = run ? run->workload : "?", preset = run ? run->preset : "?";
    if (row.error) errors.push_back(std::abs(*row.error));
    table +=
        fmt::format("{:>5} {:>5} {:>6} {:>5} {:>8}  {:<14} {:<10} {:>5}  {:<12} {:>12} {:>12} {:>8}\n", row.run_id,
                    row.source_run_id, row.sweep_run_id ? std::to_string(row.sweep_run_id) : "-",
                    row.measured_run_id ? std::to_string(row.measured_run_id) : "-", row.strategy, workload, preset,
                    row.ranks, row.link, ms(row.projected_ns), row.measured_ns > 0 ? ms(row.measured_ns) : "-",
                    row.error ? fmt::format("{:+.1f}%", 100 * *row.error) : "-");
    list.push_back({{"projection_run", row.run_id},
                    {"source_run", row.source_run_id},
                    {"sweep_run", row.sweep_run_id},
                    {"measured_run", row.measured_run_id},
                    {"workload", workload},
                    {"preset", preset},
                    {"strategy", row.strategy},
                    {"ranks", row.ranks},
                    {"link", row.link},
                    {"knobs", nlohmann::json::parse(row.knobs_json, nullptr, false)},
                    {"projected_ns", row.projected_ns},
                    {"measured_ns", row.measured_ns > 0 ? nlohmann::json(row.measured_ns) : nlohmann::json()},
                    {"error", row.error ? nlohmann::json(*row.error) : nlohmann::json()}});
  }
  const double median = vocabulary::percentile(errors, 0.5), p90 = vocabulary::percentile(errors, 0.9);
  if (json) {
    say("{}\n", nlohmann::json{{"db", db.string()},
                               {"projections", list},
                               {"measured", errors.size()},
                               {"median_abs_error", errors.empty() ? nlohmann::json() : nlohmann::json(median)},
                               {"p90_abs_error", errors.empty() ? nlohmann::json() : nlohmann::json(p90)}}
                    .dump(2));
    return kExitOk;
  }
  if (rows.empty()) {
    say("no projections in {} (trainscope project RUN ...; multi-rank runs store their own where the db has a "
        "one-rank run and a sweep to project from)\n",
        db.string());
    return kExitOk;
  }
  say("{}", table);
  if (errors.empty()) {
    say("\nnone of them is set against a measured run yet\n");
  } else {
    say("\n{} checked against their measured runs: |error| median {:.1f}%, 90th percentile {:.1f}%{}\n", errors.size(),
        100 * median, 100 * p90, errors.size() < 10 ? " (fewer than 10: the percentile is rough)" : "");
  }
  return kExitOk;
}

void store_own_projection(const std::filesystem::path& db, int64_t run, const std::string& command_line) {
  try {
    projection::project_measured(db, run, command_line);
  } catch (const std::exception& e) {
    say(stderr, "trainscope: run {}: its projection was not stored ({})\n", run, e.what());
  }
}

}  // namespace ts::cli
