#include "reports/run_digest.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>

#include "fmt/format.h"
#include "reports/statistics.h"
#include "store/liveness.h"

namespace ts::reports {

namespace {

double ms(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

std::optional<int64_t> whole_number(std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

// Per timed iteration that stored phase rows: each phase's time summed (a3c's learners add up),
// the loop's four phases first, then a workload's own; such an iteration without a phase counts 0
// for it. An iteration with no phase row at all (a run cut short between its rows) is left out:
// its phases were not stored, not of no length. The shares (docs/formulas.md, "Phase shares")
// are of those iterations' time, with what no phase covers as the unaccounted share, so that
// they add up to 1.
struct PhaseFigures {
  std::vector<PhaseSamples> phases;
  std::vector<double> unaccounted_ms;
  double unaccounted_share = 0;
};
PhaseFigures phase_figures(store::Reader& reader, int64_t run, const std::map<int64_t, double>& timed_wall_ms) {
  std::map<int64_t, std::map<std::string, double>> by_iteration;
  for (const auto& p : reader.phases(run)) {
    if (timed_wall_ms.contains(p.iteration)) by_iteration[p.iteration][p.phase] += ms(p.end_ns - p.start_ns);
  }
  std::vector<std::string> names;
  for (const char* name : {"data", "forward", "backward", "optimizer"}) {
    for (const auto& [_, m] : by_iteration) {
      if (m.contains(name)) {
        names.emplace_back(name);
        break;
      }
    }
  }
  std::set<std::string> own;
  for (const auto& [_, m] : by_iteration) {
    for (const auto& [name, _v] : m) {
      if (std::find(names.begin(), names.end(), name) == names.end()) own.insert(name);
    }
  }
  names.insert(names.end(), own.begin(), own.end());
  PhaseFigures f;
  std::map<std::string, double> phase_total;
  double span_total = 0;
  for (const auto& [iteration, m] : by_iteration) {
    double phases = 0;
    for (const auto& [name, v] : m) {
      phases += v;
      phase_total[name] += v;
    }
    // Phases run by several threads at once (a3c's learners) may add up to more than the wall
    // time: the iteration's span is then their sum, and nothing is unaccounted.
    const double span = std::max(timed_wall_ms.at(iteration), phases);
    span_total += span;
    f.unaccounted_ms.push_back(span - phases);
  }
  for (const auto& name : names) {
    PhaseSamples p{name, {}, 0, 0};
    for (const auto& [_, m] : by_iteration) {
      const auto at = m.find(name);
      p.ms.push_back(at == m.end() ? 0.0 : at->second);
    }
    p.median_ms = median(p.ms);
    p.share = span_total > 0 ? phase_total[name] / span_total : 0.0;
    f.phases.push_back(std::move(p));
  }
  double unaccounted = 0;
  for (const double v : f.unaccounted_ms) unaccounted += v;
  f.unaccounted_share = span_total > 0 ? unaccounted / span_total : 0.0;
  return f;
}

}  // namespace

double layer_ranking_ns(double median_per_iteration_ns, double forward_ns, double backward_ns) {
  return median_per_iteration_ns >= 0 ? median_per_iteration_ns : forward_ns + backward_ns;
}

std::vector<LayerTotal> slowest_first(std::vector<LayerTotal> layers) {
  const auto key = [](const LayerTotal& l) {
    return layer_ranking_ns(l.median_ms ? *l.median_ms * 1e6 : -1, l.forward_ms * 1e6, l.backward_ms * 1e6);
  };
  std::stable_sort(layers.begin(), layers.end(),
                   [&](const LayerTotal& a, const LayerTotal& b) { return key(a) > key(b); });
  return layers;
}

void rank_layer_rows(std::vector<store::LayerRow>& rows) {
  const auto key = [](const store::LayerRow& l) {
    return layer_ranking_ns(l.median_per_iteration_ns, l.forward_ns, l.backward_ns);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return key(a) > key(b); });
}

namespace {

// The one ranking rule of ops (run_digest.h, "Rankings"): within a device, by the median per
// iteration where every op of that device has one (a mix would set medians against totals), ties
// and lists without medians by the total. `median` returns < 0 for none.
template <class Row, class Median, class Total>
void rank_by_median(std::vector<Row>& rows, Median median, Total total) {
  std::map<std::string, bool> medians;
  for (const auto& r : rows) {
    auto [it, fresh] = medians.try_emplace(r.device, true);
    it->second = it->second && median(r) >= 0;
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    if (a.device != b.device) return a.device < b.device;
    if (medians[a.device] && median(a) != median(b)) return median(a) > median(b);
    return total(a) > total(b);
  });
}

}  // namespace

void rank_op_rows(std::vector<store::OpSummaryRow>& rows) {
  rank_by_median(
      rows, [](const store::OpSummaryRow& r) { return r.median_per_iteration_ns; },
      [](const store::OpSummaryRow& r) { return static_cast<double>(r.total_ns); });
}

void rank_ops(std::vector<OpTotal>& ops) {
  rank_by_median(
      ops, [](const OpTotal& o) { return o.median_ms_per_iteration.value_or(-1); },
      [](const OpTotal& o) { return o.total_ms; });
}

std::vector<OpTotal> op_totals(const std::vector<store::OpSummaryRow>& rows, bool gpu) {
  std::vector<OpTotal> out;
  double total = 0;
  for (const auto& o : rows) {
    if ((o.device != "cpu") != gpu) continue;
    OpTotal t{o.name, o.count, ms(o.total_ns), o.device, 0, std::nullopt};
    if (o.median_per_iteration_ns >= 0) t.median_ms_per_iteration = o.median_per_iteration_ns * 1e-6;
    for (const int64_t ns : o.per_iteration_ns) t.ms_per_iteration.push_back(ms(ns));
    out.push_back(std::move(t));
    total += ms(o.total_ns);
  }
  for (auto& o : out) o.fraction = total > 0 ? o.total_ms / total : 0.0;
  rank_ops(out);
  return out;
}

std::optional<Roofline> roofline_of(const std::map<std::string, double>& metrics) {
  if (!metrics.contains("roofline_step_ns") || !metrics.contains("roofline_iterations")) return std::nullopt;
  const auto m = [&](const std::string& k) { return metrics.contains(k) ? metrics.at(k) : 0.0; };
  const double n = std::max(1.0, m("roofline_iterations")), step = m("roofline_step_ns");
  Roofline r{m("roofline_iterations"), step * 1e-6 / n, std::nullopt, {}};
  if (metrics.contains("machine_sgemm_gflops")) {
    r.machine = MachinePeaks{m("machine_peak_threads"), m("machine_sgemm_gflops"), m("machine_sgemm_gflops_1t"),
                             m("machine_copy_gbps"), m("machine_copy_gbps_1t")};
  }
  const auto row = [&](const std::string& name, double ns) {
    RooflineClass c;
    c.name = name;
    c.ms = ns * 1e-6 / n;
    c.share = step > 0 ? ns / step : 0.0;
    return c;
  };
  for (const std::string cls : {"compute", "memory", "reorder", "other"}) {
    const std::string p = "roofline_" + cls + "_";
    const double ns = m(p + "ns"), flops = m(p + "flops"), bytes = m(p + "bytes");
    RooflineClass c = row(cls, ns);
    c.gflop = flops * 1e-9 / n;
    c.gb = bytes * 1e-9 / n;
    if (ns > 0) {
      c.gflops = flops / ns;  // FLOP per ns = GFLOP/s
      c.gbps = bytes / ns;
    }
    if (r.machine && ns > 0) {
      if (cls == "compute" && r.machine->sgemm_gflops > 0) c.of_peak = flops / ns / r.machine->sgemm_gflops;
      if ((cls == "memory" || cls == "reorder") && r.machine->copy_gbps > 0)
        c.of_peak = bytes / ns / r.machine->copy_gbps;
    }
    r.classes.push_back(c);
  }
  r.classes.push_back(row("data", m("roofline_data_ns")));
  r.classes.push_back(row("overhead", m("roofline_overhead_ns")));
  return r;
}

std::vector<GpuTime> gpu_times(const std::map<std::string, double>& metrics, int64_t timed) {
  std::vector<GpuTime> out;
  if (timed <= 0) return out;
  const auto t = static_cast<double>(timed);
  for (int d = 0; d < 64; ++d) {
    const std::string p = fmt::format("gpu{}_", d);
    if (!metrics.contains(p + "span_ns")) continue;
    const auto per_iteration = [&](const char* k) {
      const auto at = metrics.find(p + k + "_ns");
      return at == metrics.end() ? 0.0 : at->second * 1e-6 / t;
    };
    const auto busy = metrics.find(p + "busy_fraction");
    out.push_back({fmt::format("cuda:{}", d), busy == metrics.end() ? 0.0 : busy->second, per_iteration("span"),
                   per_iteration("compute"), per_iteration("comm"), per_iteration("exposed_comm"),
                   per_iteration("memcpy"), per_iteration("memset"), per_iteration("idle")});
  }
  return out;
}

std::vector<GpuTime> gpu_times_by_rank(const std::vector<store::GpuBreakdownRow>& rows, int64_t timed) {
  std::vector<GpuTime> out;
  if (timed <= 0) return out;
  struct Sums {
    int64_t span = 0, compute = 0, comm = 0, overlap = 0, exposed = 0, memcpy = 0, memset = 0, busy = 0, idle = 0;
  };
  std::map<std::pair<int64_t, int64_t>, Sums> by_gpu;  // (rank, device)
  for (const auto& r : rows) {
    Sums& s = by_gpu[{r.rank, r.device}];
    s.span += r.end_ns - r.start_ns;
    s.compute += r.compute_ns;
    s.comm += r.comm_ns;
    s.overlap += r.overlap_ns;
    s.exposed += r.exposed_comm_ns;
    s.memcpy += r.memcpy_ns;
    s.memset += r.memset_ns;
    s.busy += r.busy_ns;
    s.idle += r.idle_ns;
  }
  const auto t = static_cast<double>(timed);
  const auto per_iteration = [t](int64_t ns) { return ms(ns) / t; };
  for (const auto& [key, s] : by_gpu) {
    GpuTime g;
    g.rank = key.first;
    g.device = fmt::format("cuda:{}", key.second);
    // busy / span as profiler::GpuBreakdown::busy_fraction of the totals (what gpuN_busy_fraction holds).
    g.busy_fraction = s.span > 0 ? static_cast<double>(s.busy) / static_cast<double>(s.span) : 0.0;
    g.span_ms = per_iteration(s.span);
    g.compute_ms = per_iteration(s.compute);
    g.comm_ms = per_iteration(s.comm);
    g.overlap_ms = per_iteration(s.overlap);
    g.exposed_comm_ms = per_iteration(s.exposed);
    g.memcpy_ms = per_iteration(s.memcpy);
    g.memset_ms = per_iteration(s.memset);
    g.idle_ms = per_iteration(s.idle);
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<Interference> interference_figures(const std::vector<RankInterference>& ranks, int64_t timed_iterations,
                                               const std::map<int64_t, std::string>& names, size_t top) {
  std::vector<Interference> out;
  if (ranks.empty() || timed_iterations <= 0) return out;
  const auto name = [&](int64_t id) {
    const auto at = names.find(id);
    return at == names.end() ? std::string() : at->second;
  };
  const auto figures = [](const RankInterference& r, double per, int64_t rank) {
    const auto per_iteration = [per](int64_t ns) { return ms(ns) / per; };
    Interference f;
    f.rank = rank;
    f.compute_ms = per_iteration(r.op_ns);
    f.disturbed_ms = per_iteration(r.disturbed_ns);
    f.covered_ms = per_iteration(r.covered_ns);
    f.unmeasured_ms = per_iteration(r.unmeasured_ns);
    f.interference_ms = per_iteration(r.interference_ns);
    f.jitter_ms = per_iteration(r.jitter_ns);
    f.thin_ms = per_iteration(r.thin_ns);
    f.covered_share = r.covered_share();
    f.share = r.op_ns > 0 ? static_cast<double>(r.interference_ns) / static_cast<double>(r.op_ns) : 0.0;
    f.instances = r.instances;
    f.disturbed_instances = r.disturbed_instances;
    f.covered_instances = r.covered_instances;
    f.thin_instances = r.thin_instances;
    return f;
  };
  const auto timed = static_cast<double>(timed_iterations);
  RankInterference all;
  for (const auto& r : ranks) {
    Interference f = figures(r, timed, r.rank);
    for (const auto& op : r.ops) {
      if (f.top.size() >= top || op.interference_ns <= 0) break;  // most first
      std::string label = name(op.name);
      if (const std::string layer = name(op.layer); !layer.empty()) label += " " + layer;
      if (const std::string pass = name(op.pass); !pass.empty() && pass != "none") label += " (" + pass + ")";
      if (op.calls > 1) label += fmt::format(" call {} of {}", op.call + 1, op.calls);
      f.top.push_back({label, ms(op.interference_ns) / timed, ms(op.jitter_ns) / timed, ms(op.reference_ns),
                       op.disturbed, op.undisturbed});
    }
    out.push_back(std::move(f));
    all.op_ns += r.op_ns;
    all.disturbed_ns += r.disturbed_ns;
    all.covered_ns += r.covered_ns;
    all.unmeasured_ns += r.unmeasured_ns;
    all.interference_ns += r.interference_ns;
    all.jitter_ns += r.jitter_ns;
    all.thin_ns += r.thin_ns;
    all.instances += r.instances;
    all.disturbed_instances += r.disturbed_instances;
    all.covered_instances += r.covered_instances;
    all.thin_instances += r.thin_instances;
  }
  out.push_back(figures(all, timed * static_cast<double>(ranks.size()), -1));
  return out;
}

std::optional<Spread> spread_of(const std::vector<double>& values, std::string unit) {
  if (values.empty()) return std::nullopt;
  return Spread{median(values), quantile(values, 0.1), quantile(values, 0.9), std::move(unit)};
}

std::optional<RunFigures::Listed> RunFigures::listed() const {
  if (sustained_headline) return Listed{*sustained_headline, true};
  if (headline_per_iteration) return Listed{{headline_per_iteration->median, headline_per_iteration->unit}, false};
  return std::nullopt;
}

bool RunFigures::headline_counts_tokens() const {
  return sustained_headline && sustained_tokens && sustained_headline->unit == sustained_tokens->unit;
}

std::optional<Rate> RunFigures::other_sustained() const {
  return headline_counts_tokens() ? sustained_samples : sustained_tokens;
}

RunFigures run_figures(const std::vector<store::MetricRow>& metrics,
                       const std::vector<store::IterationRow>& iterations) {
  RunFigures f;
  std::map<std::string, const store::MetricRow*> by_name;
  for (const auto& m : metrics) {
    if (m.iteration < 0) by_name[m.name] = &m;
  }
  const auto value = [&](const char* name) {
    return by_name.contains(name) ? std::optional(by_name[name]->value) : std::nullopt;
  };
  const auto unit = [&](const char* name, const char* otherwise) {
    return by_name.contains(name) && !by_name[name]->unit.empty() ? by_name[name]->unit : std::string(otherwise);
  };
  const auto rate = [&](const char* name, const char* otherwise) -> std::optional<Rate> {
    if (const auto v = value(name)) return Rate{*v, unit(name, otherwise)};
    return std::nullopt;
  };
  // What the run stored at its end (session's record; docs/formulas.md, "Throughput").
  f.sustained_headline = rate("headline_throughput", "samples/s");
  f.sustained_samples = rate("throughput", "samples/s");
  f.sustained_tokens = rate("tokens_per_s", "tokens/s");
  if (const auto med = value("throughput_median")) {
    f.samples_per_iteration = Spread{*med, value("throughput_p10").value_or(0), value("throughput_p90").value_or(0),
                                     unit("throughput_median", "samples/s")};
    f.iteration_ms_median = value("iteration_time_median");
    f.timed_iterations = static_cast<int64_t>(value("timed_iterations").value_or(0));
  }
  if (const auto med = value("tokens_per_s_median")) {
    f.tokens_per_iteration = Spread{*med, value("tokens_per_s_p10").value_or(0), value("tokens_per_s_p90").value_or(0),
                                    unit("tokens_per_s_median", "tokens/s")};
  }
  if (f.samples_per_iteration) {
    f.headline_per_iteration =
        f.headline_counts_tokens() && f.tokens_per_iteration ? f.tokens_per_iteration : f.samples_per_iteration;
    return f;
  }
  // A run that never reached its final write: what it streamed.
  std::vector<double> rates, wall;
  for (const auto& it : iterations) {
    if (it.warmup) continue;
    const double t = ms(it.end_ns - it.start_ns);
    if (t <= 0 || it.samples <= 0) continue;  // a clock step, or work not counted (an import without --batch)
    wall.push_back(t);
    rates.push_back(static_cast<double>(it.samples) / (t * 1e-3));
  }
  if (rates.empty()) return f;
  f.from_kept_iterations = true;
  f.timed_iterations = static_cast<int64_t>(rates.size());
  f.samples_per_iteration = spread_of(rates, "samples/s");
  f.headline_per_iteration = f.samples_per_iteration;  // tokens are stored at the end only
  f.iteration_ms_median = median(wall);
  return f;
}

RunFigures read_run_figures(store::Reader& reader, int64_t run, KeptIterations kept) {
  const auto metrics = reader.metrics(run);
  const bool stored = std::any_of(metrics.begin(), metrics.end(), [](const store::MetricRow& m) {
    return m.iteration < 0 && m.name == "throughput_median";
  });
  if (stored || kept == KeptIterations::ignore) return run_figures(metrics, {});
  return run_figures(metrics, reader.iterations(run));
}

std::optional<double> RunDigest::job_sustained() const {
  if (!figures.sustained_headline) return std::nullopt;
  return figures.sustained_headline->value * static_cast<double>(key.ranks);
}

std::optional<double> RunDigest::job_median_per_iteration() const {
  if (!figures.headline_per_iteration) return std::nullopt;
  return figures.headline_per_iteration->median * static_cast<double>(key.ranks);
}

int64_t RunDigest::slowest_rank() const {
  int64_t slowest = -1;
  double slowest_ms = -1;
  for (const auto& b : breakdown) {
    if (b.iteration_ms > slowest_ms) {
      slowest_ms = b.iteration_ms;
      slowest = b.rank;
    }
  }
  return slowest;
}

const RankWaitMove* RunDigest::straggler() const {
  const RankWaitMove* most = nullptr;
  for (const auto& r : wait_move) {
    if (r.others_waited_ms > 0 && (!most || r.others_waited_ms > most->others_waited_ms)) most = &r;
  }
  return most;
}

const GpuTime* RunDigest::busiest_gpu() const {
  const GpuTime* busiest = nullptr;
  std::set<int64_t> ranks;
  for (const auto& g : gpus) {
    ranks.insert(g.rank);
    if (!busiest || g.compute_ms > busiest->compute_ms) busiest = &g;
  }
  return ranks.size() > 1 ? busiest : nullptr;
}

double RunDigest::share_of_peak(int64_t bytes) const {
  return peak_bytes > 0 ? static_cast<double>(bytes) / static_cast<double>(peak_bytes) : 0.0;
}

std::string RunKey::label() const {
  std::string s = fmt::format("{}/{} {} batch {}", workload, preset, device, batch);
  if (ranks > 1) s += fmt::format(" x{} ranks", ranks);
  if (framework != "trainscope") s += fmt::format(" ({})", framework);
  return s;
}

std::optional<IterationOutliers> iteration_outliers(const std::vector<double>& iteration_ms) {
  if (iteration_ms.size() < kOutlierMinIterations) return std::nullopt;
  const double q1 = quantile(iteration_ms, 0.25), q3 = quantile(iteration_ms, 0.75);
  IterationOutliers o{0, iteration_ms.size(), q3 + kOutlierFenceIqr * (q3 - q1), 0};
  for (const double t : iteration_ms) {
    if (t <= o.fence_ms) continue;
    ++o.count;
    o.slowest_ms = std::max(o.slowest_ms, t);
  }
  if (o.count == 0) return std::nullopt;
  return o;
}

namespace {
// Each collective call's time per timed iteration, averaged over the ranks, most first.
std::vector<CollectiveTime> collective_times(const std::vector<store::CollectiveRow>& rows,
                                             const std::set<int64_t>& timed, int64_t ranks) {
  std::map<std::string, std::pair<double, int64_t>> by_name;  // total ms over ranks, calls over ranks
  for (const auto& c : rows) {
    if (!timed.contains(c.iteration)) continue;
    auto& [total, calls] = by_name[c.label.empty() ? c.collective : c.collective + " " + c.label];
    total += ms(c.end_ns - c.start_ns);
    ++calls;
  }
  std::vector<CollectiveTime> out;
  const double per = static_cast<double>(timed.size()) * static_cast<double>(std::max<int64_t>(ranks, 1));
  if (per <= 0) return out;
  for (const auto& [name, v] : by_name) {
    out.push_back({name, v.first / per, std::llround(static_cast<double>(v.second) / per)});
  }
  std::stable_sort(out.begin(), out.end(), [](const CollectiveTime& a, const CollectiveTime& b) {
    return a.ms_per_iteration > b.ms_per_iteration;
  });
  return out;
}
}  // namespace

RunDigest digest_run(store::Reader& reader, const std::filesystem::path& db, const store::RunRow& run,
                     const MemoryClassifier& classify, DigestParts parts) {
  RunDigest d;
  d.db = db;
  d.run = run;
  d.key = {run.workload, run.preset, run.device, run.batch_size, std::max<int64_t>(run.ranks, 1), run.framework};
  d.status = store::status_label(run);
  if (const auto cfg = nlohmann::json::parse(run.config_json, nullptr, false);
      cfg.is_object() && cfg.contains("suite")) {
    const auto& tag = cfg["suite"];
    d.suite = tag.value("name", "");
    d.suite_entry = tag.value("entry", int64_t{0});
    d.suite_repeat = tag.value("repeat", int64_t{0});
  }
  if (run.ranks > 1) d.projections = reader.projections_of_measured(run.id);
  const auto metrics = reader.metrics(run.id);
  std::map<int64_t, double> tokens;  // per iteration, where the run stored them
  for (const auto& m : metrics) {
    if (m.iteration >= 0) {
      if (m.name == "tokens") tokens[m.iteration] = m.value;
      continue;
    }
    d.metrics[m.name] = m.value;
  }

  const auto iterations = reader.iterations(run.id);
  d.figures = run_figures(metrics, iterations);
  if (d.figures.headline_per_iteration) d.unit = d.figures.headline_per_iteration->unit;
  // Where the headline counts tokens, each timed iteration's rate does too (a run that stored
  // them for every timed iteration; else samples, and the unit says so).
  const bool tokens_lead = d.figures.headline_counts_tokens() && d.figures.tokens_per_iteration;
  const bool by_tokens = tokens_lead && std::all_of(iterations.begin(), iterations.end(), [&](const auto& it) {
                           return it.warmup || tokens.contains(it.index);
                         });
  if (tokens_lead && !by_tokens) d.unit = d.figures.samples_per_iteration->unit;
  std::vector<int64_t> timed;
  std::map<int64_t, double> timed_wall_ms;
  for (const auto& it : iterations) {
    if (it.warmup) continue;
    const double wall = ms(it.end_ns - it.start_ns);
    if (wall <= 0) continue;  // a clock step: no rate can be made of it
    timed.push_back(it.index);
    timed_wall_ms[it.index] = wall;
    d.iteration_ms.push_back(wall);
    const double work = by_tokens ? tokens.at(it.index) : static_cast<double>(it.samples);
    d.throughput_per_iteration.push_back(work / (wall * 1e-3));
  }
  PhaseFigures phases = phase_figures(reader, run.id, timed_wall_ms);
  d.phases = std::move(phases.phases);
  if (!phases.unaccounted_ms.empty()) d.unaccounted_median_ms = median(phases.unaccounted_ms);
  d.unaccounted_share = phases.unaccounted_share;

  if (d.key.ranks > 1) {
    std::map<int64_t, double> exposed;  // iteration -> the largest over ranks
    std::map<int64_t, std::vector<store::RankBreakdownRow>> per_rank;
    const std::set<int64_t> timed_set(timed.begin(), timed.end());
    d.clocks = RankClocks(reader.rank_clocks(run.id));
    const std::vector<store::CollectiveRow> collective_rows = reader.collectives(run.id);  // every rank's, read once
    {
      const std::vector<store::CollectiveWaitRow> stored = reader.collective_waits(run.id);  // v13: as written
      const auto calls =
          stored.empty() ? split_collectives(collective_rows, d.clocks, d.key.ranks) : from_rows(stored, d.key.ranks);
      d.wait_move = wait_move_by_rank(calls, timed, d.key.ranks);
      d.wait_move_uncertainty_ns = calls.uncertainty_ns;
      d.incomplete_calls = calls.incomplete;
      d.split_calls = std::count_if(calls.calls.begin(), calls.calls.end(),
                                    [&](const CollectiveCall& c) { return timed_set.contains(c.iteration); });
    }
    for (auto& b : reader.rank_breakdown(run.id)) {
      if (!timed_set.contains(b.iteration)) continue;
      exposed[b.iteration] = std::max(exposed[b.iteration], ms(b.exposed_comm_ns));
      per_rank[b.rank].push_back(b);
    }
    for (const auto& [_, v] : exposed) d.exposed_comm_ms.push_back(v);
    d.collectives = collective_times(collective_rows, timed_set, d.key.ranks);
    if (!d.exposed_comm_ms.empty()) d.exposed_comm_median_ms = median(d.exposed_comm_ms);
    // Compute slowed by communication beside it, from the rank's op and comm events (CPU runs:
    // on a GPU the host's op times are launches, not the compute).
    if (run.device == "cpu" && parts.interference) {
      std::vector<std::string>
          rank_hosts;  // each rank's host, as the launcher placed it (ranks on one share its cores)
      if (const auto cfg = nlohmann::json::parse(run.config_json, nullptr, false);
          cfg.is_object() && cfg.contains("distributed") && cfg["distributed"].is_object() &&
          cfg["distributed"].contains("rank_hosts") && cfg["distributed"]["rank_hosts"].is_array()) {
        for (const auto& h : cfg["distributed"]["rank_hosts"])
          rank_hosts.push_back(h.is_string() ? h.get<std::string>() : "");
      }
      const auto ranks = read_interference(reader, run.id, timed_set, d.clocks, rank_hosts);
      std::vector<int64_t> ids;
      for (const auto& r : ranks) {
        for (size_t i = 0; i < std::min<size_t>(r.ops.size(), 5); ++i) {
          ids.insert(ids.end(), {r.ops[i].name, r.ops[i].layer, r.ops[i].pass});
        }
      }
      d.interference = interference_figures(ranks, static_cast<int64_t>(timed_set.size()), reader.strings(ids), 5);
    }
    for (const auto& [rank, rows] : per_rank) {
      std::vector<double> it, compute, comm, overlap, exp, idle, wait;
      for (const auto& b : rows) {
        it.push_back(ms(b.end_ns - b.start_ns));
        compute.push_back(ms(b.compute_ns));
        comm.push_back(ms(b.comm_ns));
        overlap.push_back(ms(b.overlap_ns));
        exp.push_back(ms(b.exposed_comm_ns));
        idle.push_back(ms(b.idle_ns));
        wait.push_back(ms(b.backward_wait_ns));
      }
      d.breakdown.push_back(
          {rank, median(it), median(compute), median(comm), median(overlap), median(exp), median(idle), median(wait)});
    }
  }

  const auto op_rows = reader.op_summary(run.id);
  d.ops = op_totals(op_rows, false);
  d.kernels = op_totals(op_rows, true);
  d.roofline = roofline_of(d.metrics);
  d.conditions = judge_conditions(d.metrics);
  d.outliers = iteration_outliers(d.iteration_ms);
  // Several ranks: every rank's GPU, from the breakdown rows each sent (schema v10); one process:
  // rank 0's metrics, as always.
  d.gpus = d.key.ranks > 1 ? gpu_times_by_rank(reader.gpu_breakdown(run.id, std::nullopt), d.figures.timed_iterations)
                           : gpu_times(d.metrics, d.figures.timed_iterations);
  for (const auto& l : reader.layers(run.id)) {
    d.layers.push_back(
        {l.layer, l.forward_ns * 1e-6, l.backward_ns * 1e-6, l.activation_bytes, l.parameter_count,
         l.median_per_iteration_ns >= 0 ? std::optional<double>(l.median_per_iteration_ns * 1e-6) : std::nullopt});
    for (const int64_t ns : l.per_iteration_ns) d.layers.back().ms_per_iteration.push_back(ms(ns));
  }
  for (const auto& p : reader.memory_peak(run.id)) {
    d.peak_bytes += p.bytes;
    if (p.bytes != 0) d.memory.push_back({p.category, classify ? classify(p.category) : std::string(), p.bytes});
  }
  d.environment = reader.environment(run.id);
  return d;
}

Conditions read_conditions(store::Reader& reader, int64_t run) {
  std::map<std::string, double> whole_run;
  for (const auto& m : reader.metrics(run)) {
    if (m.iteration < 0 && m.rank == 0) whole_run[m.name] = m.value;
  }
  return judge_conditions(whole_run);
}

std::vector<RunDigest> select_runs(const std::filesystem::path& db, const std::vector<std::string>& selectors,
                                   const MemoryClassifier& classify, DigestParts parts) {
  store::Reader reader(db);
  const auto runs = reader.runs();
  std::map<int64_t, std::string> suite_of;  // run id -> the suite that made it ("" when none)
  for (const auto& r : runs) {
    const auto cfg = nlohmann::json::parse(r.config_json, nullptr, false);
    if (cfg.is_object() && cfg.contains("suite")) suite_of[r.id] = cfg["suite"].value("name", "");
  }
  std::set<int64_t> chosen;
  for (const auto& sel : selectors) {
    bool named = false;
    const auto dash = sel.find('-');
    const auto one = whole_number(sel);
    const auto lo = dash == std::string::npos ? std::nullopt : whole_number(std::string_view(sel).substr(0, dash));
    const auto hi = dash == std::string::npos ? std::nullopt : whole_number(std::string_view(sel).substr(dash + 1));
    for (const auto& r : runs) {
      if (r.workload == "collectives") continue;
      if (one ? r.id == *one : lo && hi ? (r.id >= *lo && r.id <= *hi) : false) {
        chosen.insert(r.id);
        named = true;
        continue;
      }
      if (one || (lo && hi)) continue;
      if (suite_of[r.id] == sel) {
        chosen.insert(r.id);
        named = true;
      }
    }
    if (!named) {
      throw std::invalid_argument(
          one || (lo && hi)
              ? fmt::format("{}: no training run {} in {}", sel, sel, db.string())
              : fmt::format("{}: neither a run id, a range A-B, nor a suite with runs in {}", sel, db.string()));
    }
  }
  std::vector<RunDigest> out;
  for (const auto& r : runs) {
    if (r.workload == "collectives") continue;
    if (selectors.empty() || chosen.contains(r.id)) out.push_back(digest_run(reader, db, r, classify, parts));
  }
  return out;
}

}  // namespace ts::reports
