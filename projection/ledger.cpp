#include "projection/ledger.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vocabulary/ps_mode.h"
#include "vocabulary/rates.h"
#include "vocabulary/utc_time.h"

namespace ts::projection {

namespace {

std::string environment_value(store::Reader& reader, int64_t run, const std::string& key) {
  for (const auto& e : reader.environment(run)) {
    if (e.key == key) return e.value;
  }
  return "";
}

nlohmann::json model_json(const Projection& p) {
  nlohmann::json link{{"source", p.link.source},
                      {"sweep_run", p.link.sweep_run},
                      {"sweep_ranks", p.link.sweep_ranks},
                      {"latency_ns", p.link.latency_ns},
                      {"algbw_gbps", p.link.algbw_gbps},
                      {"busbw_gbps", p.link.bus_gbps()},
                      {"p2p_latency_ns", p.link.p2p_latency_ns},
                      {"p2p_gbps", p.link.p2p_gbps}};
  nlohmann::json table = nlohmann::json::array();
  for (const auto& [bytes, ns] : p.link.all_reduce_table) table.push_back({bytes, ns});
  link["all_reduce_table"] = table;
  return {{"link", link}, {"assumptions", p.assumptions}, {"buckets_bytes", p.bucket_bytes}};
}

}  // namespace

int64_t store_projection(store::Writer& writer, const SourceRun& source, const Projection& p, const Inputs& in) {
  store::RunInfo info;
  info.workload = source.run.workload;
  info.preset = source.run.preset;
  info.device = source.run.device;
  info.batch_size = source.run.batch_size;
  info.threads = source.run.threads;
  info.seed = source.run.seed;
  info.trace = false;
  info.parameter_count = source.run.parameter_count;
  info.iterations = static_cast<int64_t>(source.iterations.size());
  info.warmup = 0;
  info.ranks = p.knobs.ranks;
  info.started_at = vocabulary::utc_now();
  info.command_line = in.command_line;
  info.framework = "projection";
  // The source's configuration (its units, preset table, shard) with what was projected: readers
  // name the units and the preset as for the source.
  nlohmann::json cfg = nlohmann::json::parse(source.run.config_json, nullptr, false);
  if (!cfg.is_object()) cfg = nlohmann::json::object();
  cfg["projection"] = {{"source_run", source.run.id},
                       {"sweep_run", in.sweep_run},
                       {"measured_run", in.measured_run},
                       {"knobs", nlohmann::json::parse(knobs_json(p.knobs))}};
  cfg["projection"].update(model_json(p));
  cfg["distributed"] = {{"ranks", p.knobs.ranks},
                        {"global_batch", source.run.batch_size * p.knobs.ranks},
                        {"strategy", p.knobs.strategy == Strategy::ps ? "parameter_server" : "data_parallel_allreduce"},
                        {"projected", true}};
  info.config_json = cfg.dump();

  const int64_t run = writer.begin_run(info);
  std::vector<store::IterationRow> iterations;
  std::vector<store::PhaseRow> phases;
  std::vector<store::EventRow> events;
  std::vector<store::CollectiveRow> collectives;
  std::vector<store::RankBreakdownRow> breakdown;
  std::vector<store::MetricRow> metrics{{"projected_iteration_ns", p.median_span_ns, "ns", -1, 0},
                                        {"projection_source_iteration_ns", median_span_ns(source), "ns", -1, 0},
                                        {"timed_iterations", 0, "count", -1, 0}};
  std::map<int64_t, const SourceIteration*> source_of;
  for (const auto& si : source.iterations) source_of[si.index] = &si;
  std::vector<vocabulary::TimedIteration> timed;  // rank 0's, for the rates
  const auto ns = [](double t) { return static_cast<int64_t>(std::llround(t)); };
  int64_t index = 0;
  int last_rank = -1;
  for (const auto& it : p.iterations) {
    if (it.rank != last_rank) index = 0;
    last_rank = it.rank;
    const int64_t start = ns(it.start_ns), end = ns(it.start_ns + it.span_ns);
    const SourceIteration& si = *source_of.at(it.index);
    iterations.push_back({index, false, start, end, si.samples, 0.0, it.rank});
    if (it.rank == 0) {
      timed.push_back({it.span_ns / 1e9, static_cast<double>(si.samples), static_cast<double>(si.tokens)});
      if (si.tokens > 0) metrics.push_back({"tokens", static_cast<double>(si.tokens), "count", index, 0});
    }
    for (const auto& ph : it.phases) {
      phases.push_back({index, ph.name, start + ns(ph.start_ns), start + ns(ph.end_ns), it.rank});
      events.push_back({start + ns(ph.start_ns), start + ns(ph.end_ns), ph.name, "", "phase", "", index, 0, it.rank});
    }
    for (const auto& c : it.calls) {
      events.push_back({start + ns(c.start_ns), start + ns(c.end_ns), c.what, c.label, "comm", "", index, 1, it.rank});
      if (c.what == "all_reduce" || c.what == "priority negotiation") {
        collectives.push_back({it.rank, index, 1, "all_reduce", c.what == "all_reduce" ? c.label : c.what, c.bytes,
                               start + ns(c.start_ns), start + ns(c.end_ns)});
      }
    }
    store::RankBreakdownRow b;
    b.rank = it.rank;
    b.iteration = index;
    b.start_ns = start;
    b.end_ns = end;
    b.compute_ns = ns(it.compute_ns);
    b.comm_ns = ns(it.comm_ns);
    b.overlap_ns = ns(it.overlap_ns);
    b.exposed_comm_ns = ns(it.exposed_ns);
    b.idle_ns = ns(it.idle_ns);
    (p.knobs.strategy == Strategy::allreduce ? b.backward_wait_ns : b.pull_wait_ns) = ns(it.wait_ns);
    breakdown.push_back(b);
    ++index;
  }
  metrics[2].value = static_cast<double>(timed.size());
  // The rates as a measured run's (vocabulary/rates.h), in the source's units.
  vocabulary::RateUnits units;
  if (cfg.contains("units") && cfg["units"].is_object()) {
    units.samples = cfg["units"].value("samples", std::string("samples"));
    units.tokens = cfg["units"].value("tokens", std::string());
    units.tokens_headline = cfg["units"].value("headline", std::string()) == "tokens";
  }
  for (auto& f : vocabulary::rate_figures(timed, units))
    metrics.push_back({std::move(f.name), f.value, std::move(f.unit), -1, 0});
  std::sort(events.begin(), events.end(), [](const store::EventRow& a, const store::EventRow& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start_ns < b.start_ns;
  });
  {
    store::Writer::Transaction tx(writer);
    writer.add_iterations(run, iterations);
    writer.add_phases(run, phases);
    writer.add_events(run, events);
    writer.add_collectives(run, collectives);
    writer.add_rank_breakdown(run, breakdown);
    writer.add_metrics(run, metrics);
    store::ProjectionRow row;
    row.run_id = run;
    row.source_run_id = source.run.id;
    row.sweep_run_id = in.sweep_run;
    row.measured_run_id = in.measured_run;
    row.strategy = std::string(to_string(p.knobs.strategy));
    row.ranks = p.knobs.ranks;
    row.link = in.link;
    row.latency_ns = p.link.latency_ns;
    row.bandwidth_gbps = p.link.bus_gbps();
    row.knobs_json = knobs_json(p.knobs);
    row.model_json = model_json(p).dump();
    row.projected_ns = p.median_span_ns;
    row.measured_ns = in.measured_ns;
    if (in.measured_ns > 0) row.error = p.median_span_ns / in.measured_ns - 1;
    row.created_at = info.started_at;
    writer.add_projection(row);
    writer.finish_run(run, store::RunStatus::completed, vocabulary::utc_now(), "");
    tx.commit();
  }
  return run;
}

std::optional<double> median_iteration_ns(store::Reader& reader, int64_t run) {
  std::vector<double> spans;
  for (const auto& it : reader.iterations(run)) {
    if (!it.warmup) spans.push_back(static_cast<double>(it.end_ns - it.start_ns));
  }
  if (spans.empty()) return std::nullopt;
  return vocabulary::percentile(spans, 0.5);
}

MeasuredKnobs knobs_of(store::Reader& reader, const store::RunRow& measured) {
  MeasuredKnobs out;
  if (measured.ranks < 2) {
    out.why_not = "it ran one rank";
    return out;
  }
  if (measured.device != "cpu") {
    out.why_not = "its ranks ran on " + measured.device + " (projections cover CPU ranks so far)";
    return out;
  }
  nlohmann::json d;
  try {
    d = nlohmann::json::parse(measured.config_json).value("distributed", nlohmann::json::object());
  } catch (const std::exception&) {
    out.why_not = "its stored configuration is not JSON";
    return out;
  }
  Knobs k;
  k.ranks = measured.ranks;
  const std::string strategy = d.value("strategy", "");
  if (strategy == "parameter_server") {
    k.strategy = Strategy::ps;
    const auto mode = vocabulary::parse_ps_mode(d.value("mode", std::string("sync")));
    if (!mode) {
      out.why_not = "its parameter server's mode '" + d.value("mode", std::string()) + "' is none the model knows";
      return out;
    }
    k.ps_mode = *mode;
    k.staleness = d.value("staleness", int64_t{0});
    if (d.value("servers", 1) != 1 || d.value("dedicated", false) || d.contains("server_hosts")) {
      out.why_not = "it ran several or dedicated servers (the model covers one co-located server)";
      return out;
    }
    if (d.value("priority", false)) {
      out.why_not = "its parameter server ran with priority (not modelled)";
      return out;
    }
    k.chunk_mb = d.value("chunk_mb", 1.0);
  } else if (strategy == "data_parallel_allreduce") {
    k.bucket_mb = d.value("bucket_mb", 25.0);
    k.overlap = d.value("overlap", true);
    k.arrival_order = d.value("bucket_order", std::string("arrival")) == "arrival";
    k.priority = d.value("priority", false);
    k.partition_mb = d.value("partition_mb", 4.0);
    k.cross_barrier = false;  // as the run took it (asked for, it may not have been: the metric says)
    for (const auto& m : reader.metrics(measured.id)) {
      if (m.name == "dp_cross_barrier" && m.value > 0) k.cross_barrier = true;
    }
  } else {
    out.why_not = "its strategy is not recorded";
    return out;
  }
  // Its ranks' cores: the machine's, shared by the ranks on it (namespace hosts share one).
  double cores = 0;
  for (const auto& m : reader.metrics(measured.id)) {
    if (m.name == "conditions_online_cores" && m.iteration == -1) cores = m.value;
  }
  const std::string per_machine = environment_value(reader, measured.id, "ranks_per_machine");
  if (cores > 0 && !per_machine.empty()) k.cores_per_rank = cores / std::max(1.0, std::stod(per_machine));
  out.knobs = k;
  return out;
}

std::optional<int64_t> find_source(store::Reader& reader, const store::RunRow& measured) {
  // A run that read rank 0's shard of as many ranks replays their batches; one that read the whole
  // data set stands in for it.
  const std::string shard = fmt::format("0/{}", measured.ranks);
  std::optional<int64_t> best, whole;
  for (const auto& r : reader.runs()) {
    if (r.id >= measured.id) break;
    if (r.ranks != 1 || r.framework != "trainscope" || r.status != store::RunStatus::completed || !r.trace) continue;
    if (r.workload != measured.workload || r.preset != measured.preset || r.device != measured.device ||
        r.batch_size != measured.batch_size || r.threads != measured.threads)
      continue;
    std::string its_shard;
    try {
      its_shard = nlohmann::json::parse(r.config_json).value("shard", std::string());
    } catch (const std::exception&) {
    }
    if (its_shard != shard && !its_shard.empty()) continue;
    if (reader.gradients(r.id).empty()) continue;
    (its_shard == shard ? best : whole) = r.id;
  }
  return best ? best : whole;
}

std::optional<int64_t> find_sweep(store::Reader& reader, const store::RunRow& measured) {
  const std::string hosts = environment_value(reader, measured.id, "rank_hosts");
  std::optional<int64_t> best;
  for (const auto& r : reader.runs()) {
    if (r.id >= measured.id) break;
    if (r.workload != "collectives" || r.status == store::RunStatus::running) continue;
    if (environment_value(reader, r.id, "rank_hosts") != hosts) continue;
    const auto rows = reader.collective_bench(r.id);
    const bool has = std::any_of(rows.begin(), rows.end(),
                                 [](const store::CollectiveBenchRow& b) { return b.collective == "all_reduce"; });
    if (has) best = r.id;
  }
  return best;
}

LedgerResult project_measured(const std::filesystem::path& db, int64_t measured_run, const std::string& command_line) {
  LedgerResult out;
  store::Reader reader(db);
  const auto measured = reader.run(measured_run);
  if (!measured) {
    out.why_not = fmt::format("no run {}", measured_run);
    return out;
  }
  const MeasuredKnobs knobs = knobs_of(reader, *measured);
  if (!knobs.knobs) {
    out.why_not = knobs.why_not;
    return out;
  }
  const auto source_id = find_source(reader, *measured);
  if (!source_id) {
    out.why_not = fmt::format(
        "no one-rank run of {} {} with {} threads and batch {} before it in the db (trainscope run {} --preset {} "
        "--threads {} --batch {})",
        measured->workload, measured->preset, measured->threads, measured->batch_size, measured->workload,
        measured->preset, measured->threads, measured->batch_size);
    return out;
  }
  const auto sweep_id = find_sweep(reader, *measured);
  if (!sweep_id) {
    out.why_not = "no collectives sweep (trainscope bench collectives) over the same hosts before it in the db";
    return out;
  }
  const auto measured_ns = median_iteration_ns(reader, measured_run);
  if (!measured_ns) {
    out.why_not = "it has no timed iterations";
    return out;
  }
  try {
    const SourceRun source = read_source(reader, *source_id, needs_forward_uses(*knobs.knobs));
    const LinkModel link = load_link_model(reader, *sweep_id);
    const Projection p = project(source, link, *knobs.knobs);
    store::Writer writer(db);
    const int64_t run = store_projection(
        writer, source, p, {*sweep_id, measured_run, *measured_ns, fmt::format("sweep {}", *sweep_id), command_line});
    out.row = store::Reader(db).projection_of(run);
    if (!out.row) out.why_not = "the projection was written but cannot be read back";
  } catch (const std::invalid_argument& e) {
    out.why_not = e.what();
  }
  return out;
}

}  // namespace ts::projection
