#include "viewer/models/run_comparison.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "fmt/format.h"
#include "viewer/models/run_details.h"

namespace ts::viewer {

namespace {

// What compare_runs pairs: a completed run with timed iterations; anything else it skips.
std::optional<std::string> why_not_comparable(const reports::RunDigest& d) {
  if (!d.finished_ok()) {
    return fmt::format("run {} is {}{}", d.run.id, d.status, d.run.error.empty() ? "" : " (" + d.run.error + ")");
  }
  if (d.iteration_ms.empty()) return fmt::format("run {} has no timed iteration", d.run.id);
  return std::nullopt;
}

// One side of a timed metric: how many per-iteration samples the digest holds and their median,
// a figure the digest computed (the viewer computes none of its own).
struct Side {
  size_t n = 0;
  std::optional<double> median;
};

Side side(size_t n, std::optional<double> median) { return n > 0 ? Side{n, median} : Side{}; }

Side phase_of(const reports::RunDigest& d, const std::string& phase) {
  for (const auto& p : d.phases) {
    if (p.phase == phase) return side(p.ms.size(), p.median_ms);
  }
  return {};
}

MetricDelta medians(std::string metric, std::string unit, bool higher_is_better, const Side& base, const Side& next) {
  MetricDelta m;
  m.metric = std::move(metric);
  m.unit = std::move(unit);
  m.higher_is_better = higher_is_better;
  m.base_n = base.n;
  m.base_median = base.median;
  m.new_n = next.n;
  m.new_median = next.median;
  if (m.base_median && m.new_median && *m.base_median != 0) m.change = *m.new_median / *m.base_median - 1;
  return m;
}

Side throughput_of(const reports::RunDigest& d) {
  const auto& per = d.figures.headline_per_iteration;  // in d.unit, as compare's samples
  return side(d.throughput_per_iteration.size(), per ? std::optional(per->median) : std::nullopt);
}

// The metrics compare_runs compares, by the names it gives them, in its order: throughput,
// iteration time, each phase (the base's, then the new run's own), exposed comm of distributed runs.
std::vector<MetricDelta> metric_medians(const reports::RunDigest& base, const reports::RunDigest& next) {
  std::vector<MetricDelta> out;
  out.push_back(medians("throughput", base.unit, true, throughput_of(base), throughput_of(next)));
  out.push_back(medians("iteration time", "ms", false, side(base.iteration_ms.size(), base.figures.iteration_ms_median),
                        side(next.iteration_ms.size(), next.figures.iteration_ms_median)));
  std::vector<std::string> phases;
  for (const auto* d : {&base, &next}) {
    for (const auto& p : d->phases) {
      if (std::find(phases.begin(), phases.end(), p.phase) == phases.end()) phases.push_back(p.phase);
    }
  }
  for (const auto& p : phases) out.push_back(medians("phase " + p, "ms", false, phase_of(base, p), phase_of(next, p)));
  if (base.key.ranks > 1 || next.key.ranks > 1) {
    out.push_back(medians("exposed comm", "ms", false, side(base.exposed_comm_ms.size(), base.exposed_comm_median_ms),
                          side(next.exposed_comm_ms.size(), next.exposed_comm_median_ms)));
  }
  return out;
}

std::vector<MemoryDelta> memory_rows(const reports::RunDigest& base, const reports::RunDigest& next) {
  std::map<std::string, int64_t> base_bytes, new_bytes;
  std::map<std::string, std::string> tbd_class;
  for (const auto& m : base.memory) {
    base_bytes[m.category] = m.bytes;
    tbd_class[m.category] = m.tbd_class;
  }
  for (const auto& m : next.memory) {
    new_bytes[m.category] = m.bytes;
    tbd_class[m.category] = m.tbd_class;
  }
  std::vector<MemoryDelta> out = {{"peak", "", base.peak_bytes, next.peak_bytes, std::nullopt}};
  for (const auto& [category, tbd] : tbd_class) {  // std::map: categories in compare_runs' (sorted) order
    out.push_back({category, tbd, base_bytes.contains(category) ? base_bytes.at(category) : 0,
                   new_bytes.contains(category) ? new_bytes.at(category) : 0, std::nullopt});
  }
  return out;
}

std::vector<RankBreakdownDelta> breakdown_rows(const reports::RunDigest& base, const reports::RunDigest& next) {
  std::map<int64_t, RankBreakdownDelta> by_rank;
  for (const auto& b : base.breakdown) by_rank[b.rank].base = b;
  for (const auto& b : next.breakdown) by_rank[b.rank].next = b;
  std::vector<RankBreakdownDelta> out;
  for (auto& [rank, row] : by_rank) {
    row.rank = rank;
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<OpDelta> op_rows(const std::vector<store::OpSummaryRow>& base,
                             const std::vector<store::OpSummaryRow>& next) {
  std::map<std::pair<std::string, std::string>, OpDelta> joined;
  for (const auto& o : base) {
    auto& row = joined[{o.device, o.name}];
    row.device = o.device;
    row.name = o.name;
    row.base = o;
  }
  for (const auto& o : next) {
    auto& row = joined[{o.device, o.name}];
    row.device = o.device;
    row.name = o.name;
    row.next = o;
  }
  std::vector<OpDelta> out;
  for (auto& [_, row] : joined) out.push_back(std::move(row));
  // Where the time goes in either run first: an op that vanished matters as much as one that grew.
  const auto larger_total = [](const OpDelta& o) {
    return std::max(o.base ? o.base->total_ns : 0, o.next ? o.next->total_ns : 0);
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const OpDelta& a, const OpDelta& b) { return larger_total(a) > larger_total(b); });
  return out;
}

std::vector<LayerDelta> layer_rows(const std::vector<store::LayerRow>& base, const std::vector<store::LayerRow>& next) {
  std::vector<LayerDelta> out;
  std::map<std::string, size_t> at;
  for (const auto& l : base) {
    at[l.layer] = out.size();
    out.push_back({l.layer, l, std::nullopt});
  }
  for (const auto& l : next) {
    if (const auto it = at.find(l.layer); it != at.end()) {
      out[it->second].next = l;
    } else {
      at[l.layer] = out.size();
      out.push_back({l.layer, std::nullopt, l});
    }
  }
  return out;
}

std::vector<EnvironmentDelta> environment_rows(const std::vector<store::EnvEntry>& base,
                                               const std::vector<store::EnvEntry>& next) {
  std::map<std::string, std::string> new_values;
  for (const auto& e : next) new_values[e.key] = e.value;
  std::vector<EnvironmentDelta> out;
  std::set<std::string> seen;
  for (const auto& e : base) {
    seen.insert(e.key);
    const auto it = new_values.find(e.key);
    if (it == new_values.end()) {
      out.push_back({e.key, e.value, std::nullopt});
    } else if (it->second != e.value) {
      out.push_back({e.key, e.value, it->second});
    }
  }
  for (const auto& e : next) {
    if (!seen.contains(e.key)) out.push_back({e.key, std::nullopt, e.value});
  }
  return out;
}

// compare_runs on the two runs, its rows attached to ours by name (metrics) and category (memory).
void judge(RunComparison& c) {
  const auto label = [](const RunRef& r) { return fmt::format("run {} of {}", r.run, r.db.toStdString()); };
  const reports::Comparison judged =
      reports::compare_runs({c.base}, {c.next}, label(c.base_ref), label(c.new_ref), reports::GateOptions{});
  const reports::PairComparison& pair = judged.pairs.front();
  for (auto& m : c.metrics) {
    for (const auto& s : pair.metrics) {
      if (s.metric != m.metric || s.verdict == reports::Verdict::missing) continue;
      m.statistics = s;
      m.change = s.delta;
    }
  }
  for (auto& m : c.memory) {
    for (const auto& s : pair.memory) {
      if (s.category == m.category) m.verdict = s.verdict;
    }
  }
  c.notes.insert(c.notes.end(), pair.notes.begin(), pair.notes.end());
  c.judged = true;
}

}  // namespace

std::vector<std::string> key_differences(const reports::RunKey& base, const reports::RunKey& next) {
  std::vector<std::string> out;
  const auto differ = [&out](const char* field, const auto& a, const auto& b) {
    if (a != b) out.push_back(fmt::format("{} {} vs {}", field, a, b));
  };
  differ("workload", base.workload, next.workload);
  differ("preset", base.preset, next.preset);
  differ("device", base.device, next.device);
  differ("batch", base.batch, next.batch);
  differ("ranks", base.ranks, next.ranks);
  differ("framework", base.framework, next.framework);
  return out;
}

RunComparison load_run_comparison(const RunRef& base, const RunRef& next) {
  RunDetails b = load_run_details(base.db.toStdString(), base.run);
  RunDetails n = load_run_details(next.db.toStdString(), next.run);
  RunComparison c;
  c.base_ref = base;
  c.new_ref = next;
  c.base = std::move(b.digest);
  c.next = std::move(n.digest);
  c.metrics = metric_medians(c.base, c.next);
  c.memory = memory_rows(c.base, c.next);
  c.breakdown = breakdown_rows(c.base, c.next);
  c.ops = op_rows(b.ops, n.ops);
  c.layers = layer_rows(b.layers, n.layers);
  c.environment = environment_rows(c.base.environment, c.next.environment);

  std::vector<std::string> why_not;
  if (const auto differences = key_differences(c.base.key, c.next.key); !differences.empty()) {
    why_not.push_back(fmt::format("the runs measure different configurations ({})", fmt::join(differences, ", ")));
  }
  for (const auto* d : {&c.base, &c.next}) {
    if (auto why = why_not_comparable(*d)) why_not.push_back(std::move(*why));
  }
  if (why_not.empty()) {
    judge(c);
  } else {
    c.notes.push_back(
        fmt::format("No verdicts: {}. Verdicts need two completed runs of one configuration (workload, preset, "
                    "device, batch, ranks); the changes shown are ratios of the medians, without intervals or "
                    "tests.",
                    fmt::join(why_not, "; ")));
  }
  return c;
}

}  // namespace ts::viewer
