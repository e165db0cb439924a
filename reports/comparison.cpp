#include "reports/comparison.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "fmt/format.h"
#include "reports/number_format.h"
#include "reports/statistics.h"
#include "vocabulary/memory_category.h"

namespace ts::reports {

namespace {

// One metric's per-iteration samples from every run of one side, pooled, with the variance
// inflation that their autocorrelation within each run calls for (statistics.h).
struct Samples {
  std::vector<double> values;
  double autocorrelation = 0, inflation = 1;
};

Samples pooled(const std::vector<const RunDigest*>& runs,
               const std::function<const std::vector<double>*(const RunDigest&)>& pick) {
  Samples out;
  std::vector<std::vector<double>> series;
  for (const RunDigest* r : runs) {
    if (const auto* v = pick(*r)) {
      out.values.insert(out.values.end(), v->begin(), v->end());
      series.push_back(*v);
    }
  }
  out.autocorrelation = lag1_autocorrelation(series);
  out.inflation = autocorrelation_inflation(out.autocorrelation);
  return out;
}

MetricComparison compare_samples(std::string metric, std::string unit, bool higher_is_better, const Samples& base_s,
                                 const Samples& next_s, size_t min_samples = kMinSamples) {
  const std::vector<double>& base = base_s.values;
  const std::vector<double>& next = next_s.values;
  // Iterations are series, not independent draws: the tests are widened by the autocorrelation
  // seen within the runs (docs/formulas.md, "Comparisons").
  const double inflation = two_sample_inflation(base.size(), base_s.inflation, next.size(), next_s.inflation);
  MetricComparison m;
  m.autocorrelation = std::max(base_s.autocorrelation, next_s.autocorrelation);
  m.variance_inflation = inflation;
  m.metric = std::move(metric);
  m.unit = std::move(unit);
  m.higher_is_better = higher_is_better;
  m.base_n = base.size();
  m.new_n = next.size();
  if (base.empty() || next.empty()) {
    m.verdict = Verdict::missing;
    return m;
  }
  m.base_median = median(base);
  m.new_median = median(next);
  const bool positive = std::all_of(base.begin(), base.end(), [](double v) { return v > 0; }) &&
                        std::all_of(next.begin(), next.end(), [](double v) { return v > 0; });
  if (positive) {
    // The change as a ratio, estimated on the logarithms: a 2x slowdown and a 2x speed-up are
    // equally far from no change, and a few slow outliers do not move the estimate.
    const RatioEstimate r = ratio_estimate(base, next, 0.95, inflation);
    m.delta = r.ratio - 1;
    m.delta_low = r.low - 1;
    m.delta_high = r.high - 1;
  } else if (m.base_median != 0) {
    // A phase that is sometimes 0 ms (no data loading on some iterations): the shift in ms,
    // relative to the base's median.
    const ShiftEstimate s = hodges_lehmann(base, next, 0.95, inflation);
    m.delta = s.estimate / m.base_median;
    m.delta_low = s.low / m.base_median;
    m.delta_high = s.high / m.base_median;
  }
  m.p_value = mann_whitney_u(base, next, inflation).p_value;
  if (base.size() < min_samples || next.size() < min_samples) {
    m.verdict = Verdict::too_few_samples;
  } else if (m.p_value < kSignificance && (m.delta_low > 0 || m.delta_high < 0)) {
    const bool up = m.delta > 0;
    m.verdict = up == higher_is_better ? Verdict::faster : Verdict::slower;
  } else {
    m.verdict = Verdict::no_change;
  }
  return m;
}

Verdict memory_verdict(int64_t base_bytes, int64_t new_bytes) {
  return new_bytes == base_bytes ? Verdict::same : new_bytes > base_bytes ? Verdict::grew : Verdict::shrank;
}

// The ledger's peak bytes of a side: deterministic for a given build, model and batch, so one
// run speaks for the side; repeats that disagree are noted.
std::map<std::string, int64_t> memory_of(const RunDigest& r) {
  std::map<std::string, int64_t> m;
  m["peak"] = r.peak_bytes;
  for (const auto& c : r.memory) m[c.category] = c.bytes;
  return m;
}

// What a run ran with: its stored config's keys (not the command line or the suite tag, which
// name rather than configure) and its environment's, as text.
std::map<std::string, std::string> run_facts(const RunDigest& r) {
  std::map<std::string, std::string> facts;
  const auto cfg = nlohmann::json::parse(r.run.config_json, nullptr, false);
  if (cfg.is_object()) {
    for (const auto& [k, v] : cfg.items()) {
      if (k == "command_line" || k == "suite") continue;
      facts[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  for (const auto& e : r.environment) facts["environment " + e.key] = e.value;
  facts["framework"] = r.run.framework;  // TBD's dimension: whose training (issue 42)
  return facts;
}

// The frameworks of a side's runs ("trainscope", "pytorch"), each once.
std::set<std::string> frameworks_of(const std::vector<const RunDigest*>& side) {
  std::set<std::string> out;
  for (const RunDigest* r : side) out.insert(r->run.framework);
  return out;
}

// Across frameworks each side stores keys the other has no notion of (oneDNN's version, torch's
// BLAS): only what both sides name differs in a way worth a row, and the framework itself.
std::vector<Difference> differences_of(const std::vector<const RunDigest*>& base,
                                       const std::vector<const RunDigest*>& next, bool across_frameworks) {
  // Every key's values on each side, in run order without repeats.
  const auto values_of = [](const std::vector<const RunDigest*>& side) {
    std::map<std::string, std::vector<std::string>> values;
    for (const auto* r : side) {
      for (const auto& [k, v] : run_facts(*r)) {
        auto& seen = values[k];
        if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
      }
    }
    return values;
  };
  const auto b = values_of(base), n = values_of(next);
  std::set<std::string> keys;
  for (const auto& [k, _] : b) keys.insert(k);
  for (const auto& [k, _] : n) keys.insert(k);
  const auto text = [](const std::map<std::string, std::vector<std::string>>& side, const std::string& k) {
    const auto at = side.find(k);
    return at == side.end() ? std::string("(none)") : fmt::format("{}", fmt::join(at->second, " | "));
  };
  std::vector<Difference> out;
  for (const auto& k : keys) {
    if (across_frameworks && (!b.contains(k) || !n.contains(k))) continue;
    const std::string bt = text(b, k), nt = text(n, k);
    if (bt != nt) out.push_back({k, bt, nt});
  }
  // Frameworks that differ are the comparison's subject: their row first.
  std::stable_partition(out.begin(), out.end(), [](const Difference& d) { return d.what == "framework"; });
  return out;
}

// Each op, kernel, layer and collective call's time per timed iteration, averaged over a side's
// runs (a collective's also over the ranks: waiting for the last rank included).
std::map<std::pair<std::string, std::string>, double> time_per_iteration(const std::vector<const RunDigest*>& side) {
  std::map<std::pair<std::string, std::string>, double> out;
  for (const RunDigest* r : side) {
    const double share = 1.0 / static_cast<double>(side.size());
    if (r->figures.timed_iterations > 0) {
      const double per = share / static_cast<double>(r->figures.timed_iterations);
      for (const auto& o : r->ops) out[{"op", o.name}] += o.total_ms * per;
      for (const auto& k : r->kernels) out[{"kernel", k.name}] += k.total_ms * per;
    }
    for (const auto& l : r->layers) out[{"layer", l.layer}] += (l.forward_ms + l.backward_ms) * share;  // per iteration
    for (const auto& c : r->collectives) out[{"collective", c.name}] += c.ms_per_iteration * share;
  }
  return out;
}

// Each run's times in every timed iteration of one op or layer (nullptr where it stored none).
const std::vector<double>* per_iteration_of(const RunDigest& r, const std::string& kind, const std::string& name) {
  if (kind == "op") {
    for (const auto& o : r.ops) {
      if (o.name == name) return o.ms_per_iteration.empty() ? nullptr : &o.ms_per_iteration;
    }
  } else if (kind == "layer") {
    for (const auto& l : r.layers) {
      if (l.layer == name) return l.ms_per_iteration.empty() ? nullptr : &l.ms_per_iteration;
    }
  }
  return nullptr;
}

// The Mann-Whitney p of a culprit's per-iteration times, base against new, widened by their
// autocorrelation; unset unless every run of both sides stored them and each side has kMinSamples.
std::optional<double> culprit_p_value(const std::vector<const RunDigest*>& base,
                                      const std::vector<const RunDigest*>& next, const Culprit& c) {
  Samples sides[2];
  int side = 0;
  for (const auto* runs : {&base, &next}) {
    std::vector<std::vector<double>> series;
    for (const RunDigest* r : *runs) {
      const auto* v = per_iteration_of(*r, c.kind, c.name);
      if (!v) return std::nullopt;
      sides[side].values.insert(sides[side].values.end(), v->begin(), v->end());
      series.push_back(*v);
    }
    sides[side].inflation = autocorrelation_inflation(lag1_autocorrelation(series));
    ++side;
  }
  const Samples& b = sides[0];
  const Samples& n = sides[1];
  if (b.values.size() < kMinSamples || n.values.size() < kMinSamples) return std::nullopt;
  const double inflation = two_sample_inflation(b.values.size(), b.inflation, n.values.size(), n.inflation);
  return mann_whitney_u(b.values, n.values, inflation).p_value;
}

// The ops, kernels, layers and collective calls whose time per timed iteration grew most (then
// those that shrank most), at most kCulpritsKept of each direction, the significant first
// (Culprit); nothing when a side was not traced.
std::vector<Culprit> culprits_of(const std::vector<const RunDigest*>& base, const std::vector<const RunDigest*>& next,
                                 bool across_frameworks) {
  const auto b = time_per_iteration(base), n = time_per_iteration(next);
  if (b.empty() || n.empty()) return {};
  // Across frameworks, ops are each framework's own (conv2d against aten::mkldnn_convolution): only
  // what both sides name (layers by their module path, mostly) is compared, never "new" or "gone".
  std::vector<Culprit> all;
  for (const auto& [key, ms] : b) {
    const auto other = n.find(key);
    if (across_frameworks && other == n.end()) continue;
    all.push_back({key.first, key.second, ms, other == n.end() ? 0.0 : other->second});
  }
  for (const auto& [key, ms] : n) {
    if (!b.contains(key) && !across_frameworks) all.push_back({key.first, key.second, 0.0, ms});
  }
  size_t tested = 0;
  for (auto& c : all) {
    if (c.delta_ms() == 0) continue;
    c.p_value = culprit_p_value(base, next, c);
    tested += c.p_value.has_value();
  }
  for (auto& c : all) c.significant = c.p_value && *c.p_value < kSignificance / static_cast<double>(tested);
  // Layers hold ops: an op's growth shows in its layer too. Both are kept; they answer "which
  // computation" and "where in the model".
  const auto ranked = [&](bool grown) {
    std::vector<Culprit> v;
    for (const auto& c : all) {
      if (grown ? c.delta_ms() > 0 : c.delta_ms() < 0) v.push_back(c);
    }
    std::stable_sort(v.begin(), v.end(), [](const Culprit& x, const Culprit& y) {
      if (x.significant != y.significant) return x.significant;
      return std::abs(x.delta_ms()) > std::abs(y.delta_ms());
    });
    if (v.size() > kCulpritsKept) v.resize(kCulpritsKept);
    return v;
  };
  std::vector<Culprit> out = ranked(true);
  for (auto& c : ranked(false)) out.push_back(std::move(c));
  return out;
}

// A culprit's p in words: "p = 2e-05", "p = 0.31, not significant", "" when not tested.
std::string culprit_p_text(const Culprit& c) {
  if (!c.p_value) return "";
  return fmt::format("p = {:.2g}{}", *c.p_value, c.significant ? "" : ", not significant");
}

// "; most grown: op conv2d_backward_weights +3.1 ms/iteration (+14.0%), ...", or "" with none.
std::string culprits_text(const std::vector<Culprit>& culprits) {
  std::vector<std::string> named;
  for (const auto& c : culprits) {
    if (named.size() == kCulpritsNamed || c.delta_ms() <= 0) break;
    std::vector<std::string> notes = {c.base_ms > 0 ? signed_percent(c.new_ms / c.base_ms - 1) : "new"};
    if (const std::string p = culprit_p_text(c); !p.empty()) notes.push_back(p);
    named.push_back(
        fmt::format("{} {} {:+.3g} ms/iteration ({})", c.kind, c.name, c.delta_ms(), fmt::join(notes, ", ")));
  }
  return named.empty() ? "" : fmt::format("; most grown: {}", fmt::join(named, ", "));
}

std::string interval_brackets(const MetricComparison& m) {
  return fmt::format("[{}, {}]", signed_percent(m.delta_low), signed_percent(m.delta_high));
}

PairComparison compare_pair(const RunKey& key, const std::vector<const RunDigest*>& base,
                            const std::vector<const RunDigest*>& next) {
  PairComparison p;
  p.key = key;
  for (const auto* r : base) {
    p.base_runs.push_back(r->run.id);
    p.base_run_throughput.push_back(median(r->throughput_per_iteration));
  }
  for (const auto* r : next) {
    p.new_runs.push_back(r->run.id);
    p.new_run_throughput.push_back(median(r->throughput_per_iteration));
  }
  // A run measured while the machine was busy elsewhere measures that work too: say so beside
  // the figures it makes (docs/formulas.md, "Measurement conditions").
  for (const auto* side : {&base, &next}) {
    for (const auto* r : *side) {
      if (!r->conditions.noisy()) continue;
      p.noisy_runs.push_back(r->run.id);
      p.notes.push_back(
          fmt::format("{} run {} was {}", side == &base ? "base" : "new", r->run.id, r->conditions.verdict_line()));
    }
  }
  const std::string unit = base.front()->unit;
  // Rates in different units (a run stored before its workload's tokens were counted beside one
  // after) cannot be set side by side: the throughput is then missing, which the gate never passes.
  const auto other_unit = [&](const RunDigest* r) { return r->unit != unit; };
  if (std::any_of(base.begin(), base.end(), other_unit) || std::any_of(next.begin(), next.end(), other_unit)) {
    p.notes.push_back(fmt::format("throughput not compared: the runs' rates are in different units ({} and {})", unit,
                                  (std::find_if(base.begin(), base.end(), other_unit) != base.end()
                                       ? *std::find_if(base.begin(), base.end(), other_unit)
                                       : *std::find_if(next.begin(), next.end(), other_unit))
                                      ->unit));
    p.metrics.push_back(compare_samples("throughput", unit, true, Samples{}, Samples{}));
  } else if (base.size() >= kMinRepetitions && next.size() >= kMinRepetitions) {
    // Enough repeats: the run is the unit. Iterations of one run share its moment (a busy
    // neighbour, the machine's state), which only other runs can show.
    Samples b, n;
    b.values = p.base_run_throughput;
    n.values = p.new_run_throughput;
    p.metrics.push_back(compare_samples("throughput", unit, true, b, n, kMinRepetitions));
    p.metrics.back().sample = "run";
  } else {
    p.metrics.push_back(compare_samples("throughput", unit, true,
                                        pooled(base, [](const RunDigest& r) { return &r.throughput_per_iteration; }),
                                        pooled(next, [](const RunDigest& r) { return &r.throughput_per_iteration; })));
  }
  p.metrics.push_back(compare_samples("iteration time", "ms", false,
                                      pooled(base, [](const RunDigest& r) { return &r.iteration_ms; }),
                                      pooled(next, [](const RunDigest& r) { return &r.iteration_ms; })));
  std::vector<std::string> phases;
  for (const auto* side : {&base, &next}) {
    for (const auto* r : *side) {
      for (const auto& ph : r->phases) {
        if (std::find(phases.begin(), phases.end(), ph.phase) == phases.end()) phases.push_back(ph.phase);
      }
    }
  }
  for (const auto& name : phases) {
    const auto pick = [&name](const RunDigest& r) -> const std::vector<double>* {
      for (const auto& ph : r.phases) {
        if (ph.phase == name) return &ph.ms;
      }
      return nullptr;
    };
    p.metrics.push_back(compare_samples("phase " + name, "ms", false, pooled(base, pick), pooled(next, pick)));
  }
  if (key.ranks > 1) {
    p.metrics.push_back(compare_samples("exposed comm", "ms", false,
                                        pooled(base, [](const RunDigest& r) { return &r.exposed_comm_ms; }),
                                        pooled(next, [](const RunDigest& r) { return &r.exposed_comm_ms; })));
  }

  p.across_frameworks = frameworks_of(base) != frameworks_of(next);
  p.differences = differences_of(base, next, p.across_frameworks);
  p.culprits = culprits_of(base, next, p.across_frameworks);
  if (p.across_frameworks) {
    // What both sides measure alike: the resident memory training added at its peak, over the
    // process before the model (rss_peak_growth_bytes). Each framework's books by category (PyTorch's
    // memory profiler mapped onto trainscope's ledger) follow where both sides kept them.
    const auto rss = [](const RunDigest& r) {
      const auto it = r.metrics.find("rss_peak_growth_bytes");
      return it == r.metrics.end() ? int64_t{0} : static_cast<int64_t>(it->second);
    };
    const int64_t b = rss(*base.front()), n = rss(*next.front());
    p.memory.push_back({"process RSS growth", b, n, memory_verdict(b, n)});
    p.notes.push_back(
        "across frameworks: memory is first the resident memory training added at its peak, then each framework's "
        "tensors by category where both kept them (PyTorch's memory profiler: docs/import.md); ops, kernels and "
        "layers are compared only where both sides name them");
    for (const auto* side : {&base, &next}) {
      for (const RunDigest* r : *side) {
        if (const auto u = r->metrics.find("unprofiled_headline_throughput"); u != r->metrics.end())
          p.notes.push_back(fmt::format("run {} ({}) without its profiler: {} {} sustained (the same iterations, run "
                                        "first; the throughput rows compare the profiled ones)",
                                        r->run.id, r->run.framework, three_digits(u->second), r->unit));
      }
    }
    if (base.front()->peak_bytes == 0 || next.front()->peak_bytes == 0) return p;
  }
  const auto base_mem = memory_of(*base.front());
  const auto new_mem = memory_of(*next.front());
  for (const auto* side : {&base, &next}) {
    for (const auto* r : *side) {
      if (memory_of(*r) != memory_of(*side->front())) {
        p.notes.push_back(
            fmt::format("run {}'s memory at peak differs from run {}'s on the same side: the ledger was not "
                        "deterministic here; the first run's is compared",
                        r->run.id, side->front()->run.id));
      }
    }
  }
  std::set<std::string> categories;
  for (const auto& [c, _] : base_mem) categories.insert(c);
  for (const auto& [c, _] : new_mem) categories.insert(c);
  categories.erase("peak");
  std::vector<std::string> order = {"peak"};
  order.insert(order.end(), categories.begin(), categories.end());
  for (const auto& c : order) {
    MemoryComparison m;
    m.category = c;
    m.base_bytes = base_mem.contains(c) ? base_mem.at(c) : 0;
    m.new_bytes = new_mem.contains(c) ? new_mem.at(c) : 0;
    m.verdict = memory_verdict(m.base_bytes, m.new_bytes);
    p.memory.push_back(m);
  }
  return p;
}

std::string interval_text(const MetricComparison& m) {
  if (m.verdict == Verdict::missing) return "";
  return fmt::format("{} [{}, {}]", signed_percent(m.delta), signed_percent(m.delta_low), signed_percent(m.delta_high));
}

std::string row_class(Verdict v) {
  switch (v) {
    case Verdict::faster:
    case Verdict::shrank: return "better";
    case Verdict::slower:
    case Verdict::grew: return "worse";
    case Verdict::too_few_samples:
    case Verdict::missing: return "warning";
    default: return "";
  }
}

std::string runs_text(const std::vector<int64_t>& ids) {
  std::vector<std::string> s;
  for (auto id : ids) s.push_back(std::to_string(id));
  return fmt::format("{}", fmt::join(s, ", "));
}

// The memory gate: each category may grow by `tolerance_pct` of its base bytes (workspace by
// kWorkspaceTolerancePct or kWorkspaceToleranceBytes where larger), the peak by its own share of
// the tolerance plus what workspace was allowed, since the peak holds the workspace.
void gate_memory(const PairComparison& p, double tolerance_pct, std::vector<std::string>& regressions) {
  const std::string workspace(vocabulary::to_string(vocabulary::Category::workspace));
  const auto allowed = [&](const MemoryComparison& m) {
    const double base = static_cast<double>(m.base_bytes);
    double a = base * tolerance_pct / 100.0;
    if (m.category == workspace) {
      a = std::max({a, base * kWorkspaceTolerancePct / 100.0, static_cast<double>(kWorkspaceToleranceBytes)});
    }
    return a;
  };
  const auto growth = [](const MemoryComparison& m) {
    return fmt::format("{} to {} bytes ({}{})", with_commas(m.base_bytes), with_commas(m.new_bytes),
                       m.new_bytes >= m.base_bytes ? "+" : "", with_commas(m.new_bytes - m.base_bytes));
  };
  double workspace_allowance = 0;
  for (const auto& m : p.memory) {
    if (m.category == "peak") continue;
    const double a = allowed(m);
    if (m.category == workspace) workspace_allowance = a;
    if (static_cast<double>(m.new_bytes - m.base_bytes) > a) {
      regressions.push_back(fmt::format("{}: {} memory at peak grew from {}, above the {} bytes allowed", p.key.label(),
                                        m.category, growth(m), with_commas(static_cast<int64_t>(a))));
    }
  }
  const auto& peak = p.memory.front();
  const double peak_allowed = allowed(peak) + workspace_allowance;
  if (static_cast<double>(peak.new_bytes - peak.base_bytes) > peak_allowed) {
    regressions.push_back(fmt::format("{}: peak memory grew from {}, above the {} bytes allowed", p.key.label(),
                                      growth(peak), with_commas(static_cast<int64_t>(peak_allowed))));
  }
}

}  // namespace

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::faster: return "faster";
    case Verdict::slower: return "slower";
    case Verdict::no_change: return "no significant change";
    case Verdict::too_few_samples: return "too few samples";
    case Verdict::same: return "same";
    case Verdict::grew: return "grew";
    case Verdict::shrank: return "shrank";
    case Verdict::missing: return "missing";
  }
  return "?";
}

Comparison compare_runs(const std::vector<RunDigest>& base, const std::vector<RunDigest>& next, std::string base_label,
                        std::string new_label, const GateOptions& gate) {
  Comparison c;
  c.base_label = std::move(base_label);
  c.new_label = std::move(new_label);
  std::map<RunKey, std::vector<const RunDigest*>> by_base, by_new;
  for (const auto* side : {&base, &next}) {
    for (const auto& r : *side) {
      const std::string which = side == &base ? "base" : "new";
      if (!r.finished_ok()) {
        c.skipped.push_back(fmt::format("{} run {} ({}): {}{}", which, r.run.id, r.key.label(), r.status,
                                        r.run.error.empty() ? "" : ": " + r.run.error));
        continue;
      }
      if (r.iteration_ms.empty()) {
        c.skipped.push_back(fmt::format("{} run {} ({}): no timed iteration", which, r.run.id, r.key.label()));
        continue;
      }
      (side == &base ? by_base : by_new)[r.key].push_back(&r);
    }
  }
  // A configuration of one framework on one side and of another on the other, and nothing else
  // that differs: the two frameworks side by side (as `compare NATIVE PYTORCH` asks).
  for (auto b = by_base.begin(); b != by_base.end(); ++b) {
    if (by_new.contains(b->first)) continue;
    std::vector<RunKey> partners;
    for (const auto& [k, _] : by_new) {
      if (!by_base.contains(k) && k.with_framework(b->first.framework) == b->first) partners.push_back(k);
    }
    if (partners.size() != 1) continue;
    auto moved = by_new.extract(partners.front());
    moved.key() = b->first;
    by_new.insert(std::move(moved));
  }
  std::vector<double> ratios;
  for (const auto& [key, runs] : by_base) {
    const auto other = by_new.find(key);
    if (other == by_new.end()) {
      c.only_in_base.push_back(key.label());
      continue;
    }
    PairComparison p = compare_pair(key, runs, other->second);
    if (p.metrics.front().base_median > 0 && p.metrics.front().new_median > 0) {
      ratios.push_back(p.metrics.front().new_median / p.metrics.front().base_median);
    }
    c.pairs.push_back(std::move(p));
  }
  for (const auto& [key, _] : by_new) {
    if (!by_base.contains(key)) c.only_in_new.push_back(key.label());
  }
  if (c.pairs.empty()) {
    std::string why = "nothing to compare: no workload, preset, device, batch and rank count is in both selections";
    if (by_base.empty() || by_new.empty())
      why += fmt::format(" ({} has no completed run)", by_base.empty() ? c.base_label : c.new_label);
    throw std::invalid_argument(why);
  }
  if (!ratios.empty()) c.geomean_throughput_ratio = geometric_mean(ratios);

  if (gate.fail_on_regression_pct) {
    c.gated = true;
    const double limit = *gate.fail_on_regression_pct / 100.0;
    for (const auto& p : c.pairs) {
      const auto& thr = p.metrics.front();
      if (thr.verdict == Verdict::too_few_samples || thr.verdict == Verdict::missing) {
        c.inconclusive.push_back(fmt::format("{}: throughput not judged ({}; {}/{} samples, at least {} a side)",
                                             p.key.label(), to_string(thr.verdict), thr.base_n, thr.new_n,
                                             kMinSamples));
      }
      // A slowdown is the time per sample growing: base rate / new rate - 1.
      const double slowdown = thr.delta > -1 ? 1.0 / (1.0 + thr.delta) - 1.0 : 0.0;
      // Iterations of one run share its moment (a noisy neighbour, the clock): with 2 or 3
      // repeats on both sides (fewer than kMinRepetitions, so the iterations are the sample), a
      // regression must also hold in every repeat, each new run slower than each base run, so
      // that one disturbed run does not pass for a slower build.
      const bool every_repeat = thr.sample == "run" || p.base_run_throughput.size() < 2 ||
                                p.new_run_throughput.size() < 2 ||
                                *std::max_element(p.new_run_throughput.begin(), p.new_run_throughput.end()) <
                                    *std::min_element(p.base_run_throughput.begin(), p.base_run_throughput.end());
      if (thr.verdict == Verdict::slower && slowdown > limit) {
        const std::string found = fmt::format("{}: throughput {} {} ({} slower per sample, p = {:.2g}){}",
                                              p.key.label(), signed_percent(thr.delta), interval_brackets(thr),
                                              signed_percent(slowdown), thr.p_value, culprits_text(p.culprits));
        // The least slowdown the interval allows (its end nearest no change).
        const double least_slowdown = thr.delta_high > -1 ? 1.0 / (1.0 + thr.delta_high) - 1.0 : 0.0;
        const bool beyond_noise = least_slowdown > kNoisyRegressionFactor * limit;
        if (every_repeat && !p.noisy_runs.empty() && !beyond_noise) {
          // A slowdown measured while something else took the machine's time is that other
          // work's as much as the build's: not judged (docs/ci.md says what CI does then).
          c.inconclusive.push_back(fmt::format("{}, but measured on a busy machine (run {} noisy): rerun where it "
                                               "is quiet to judge it",
                                               found, fmt::join(p.noisy_runs, ", ")));
        } else if (every_repeat) {
          c.regressions.push_back(fmt::format(
              "{}, above the {}% allowed{}", found, *gate.fail_on_regression_pct,
              p.noisy_runs.empty() ? ""
                                   : fmt::format(" (run {} noisy, but even the interval's least slowdown, {}, is "
                                                 "beyond what a busy machine does)",
                                                 fmt::join(p.noisy_runs, ", "), signed_percent(least_slowdown))));
        } else {
          c.notes.push_back(
              fmt::format("{}: throughput {} overall, but not in every repeat (the runs' medians overlap): "
                          "not counted as a regression",
                          p.key.label(), signed_percent(thr.delta)));
        }
      }
      gate_memory(p, gate.memory_tolerance_pct, c.regressions);
    }
  }
  return c;
}

std::string gate_decision(const Comparison& c) {
  if (!c.gated) return "";
  if (!c.regressions.empty()) return "failed";
  return c.inconclusive.empty() ? "passed" : "inconclusive";
}

Document comparison_document(const Comparison& c) {
  Document d;
  d.title = "trainscope comparison";
  d.subtitle = fmt::format("base: {} · new: {}", c.base_label, c.new_label);

  Section summary{"Summary", {}, {}};
  // What differs first: a change a user did not mean (threads, a library) explains a result
  // better than any statistic.
  Table differ;
  differ.caption = "What base and new ran with differently (stored configuration and environment)";
  differ.header = {"configuration", "what", "base", "new"};
  for (const auto& p : c.pairs) {
    for (const auto& d : p.differences) differ.rows.push_back({p.key.label(), d.what, d.base, d.next});
  }
  if (differ.rows.empty()) {
    summary.blocks.push_back(Paragraph{"Base and new ran with the same stored configuration and environment."});
  } else {
    summary.blocks.push_back(std::move(differ));
  }
  Table overview;
  overview.caption =
      fmt::format("Throughput per configuration: medians over every timed iteration of every repeat, or over the "
                  "runs' medians where both sides have {} or more runs (n counts runs then); change = new/base - 1 "
                  "with its 95% Hodges-Lehmann interval; p from the two-sided Mann-Whitney U test; over "
                  "iterations, both widened by the iterations' autocorrelation within their runs.",
                  kMinRepetitions);
  overview.header = {"configuration", "base",        "new",     "change [95% CI]", "p",
                     "n base/new",    "peak memory", "verdict", "conditions"};
  overview.numeric = {false, true, true, true, true, true, false, false, false};
  for (const auto& p : c.pairs) {
    const auto& m = p.metrics.front();
    const auto& peak = p.memory.front();
    const std::string mem =
        peak.verdict == Verdict::same
            ? "same"
            : fmt::format("{} ({} → {})", to_string(peak.verdict), human_bytes(static_cast<double>(peak.base_bytes)),
                          human_bytes(static_cast<double>(peak.new_bytes)));
    overview.rows.push_back(
        {p.key.label(), three_digits(m.base_median) + " " + m.unit, three_digits(m.new_median) + " " + m.unit,
         interval_text(m), fmt::format("{:.3g}", m.p_value), fmt::format("{}/{}", m.base_n, m.new_n), mem,
         std::string(to_string(m.verdict)),
         // A busy machine's runs measured its load too: said on the row itself.
         p.noisy_runs.empty() ? "no noisy run" : fmt::format("noisy (run {})", fmt::join(p.noisy_runs, ", "))});
    const std::string verdict_class = peak.verdict == Verdict::grew ? "worse" : row_class(m.verdict);
    overview.row_class.push_back(verdict_class.empty() && !p.noisy_runs.empty() ? "warning" : verdict_class);
  }
  if (c.geomean_throughput_ratio > 0) {
    overview.rows.push_back({"geomean", "", "", signed_percent(c.geomean_throughput_ratio - 1), "", "", "", "", ""});
    overview.row_class.push_back("");
  }
  summary.blocks.push_back(std::move(overview));

  // The chart: each configuration's throughput change with its interval, as floating bars.
  nlohmann::json labels = nlohmann::json::array(), intervals = nlohmann::json::array(),
                 points = nlohmann::json::array();
  for (const auto& p : c.pairs) {
    const auto& m = p.metrics.front();
    labels.push_back(p.key.label());
    intervals.push_back({m.delta_low * 100, m.delta_high * 100});
    points.push_back(m.delta * 100);
  }
  Chart change;
  change.title = "Throughput change, new vs base (%)";
  change.alt_text = "Throughput change per configuration with its 95% interval; the table above has the numbers.";
  change.config = {
      {"type", "bar"},
      {"data",
       {{"labels", labels},
        {"datasets",
         {{{"label", "95% interval"}, {"data", intervals}, {"backgroundColor", "rgba(70,130,180,0.35)"}},
          {{"label", "estimate"},
           {"type", "line"},
           {"data", points},
           {"showLine", false},
           {"pointRadius", 5},
           {"borderColor", "rgb(20,60,120)"},
           {"backgroundColor", "rgb(20,60,120)"}}}}}},
      {"options",
       {{"indexAxis", "y"},
        {"maintainAspectRatio", false},
        {"scales", {{"x", {{"title", {{"display", true}, {"text", "% change in samples/s (right: faster)"}}}}}}}}}};
  summary.blocks.push_back(std::move(change));

  if (c.gated) {
    const std::string decision = gate_decision(c);
    summary.blocks.push_back(Paragraph{
        decision == "passed" ? "Regression gate: passed."
        : decision == "failed"
            ? fmt::format("Regression gate: FAILED ({} regression{}).", c.regressions.size(),
                          c.regressions.size() == 1 ? "" : "s")
            : fmt::format("Regression gate: INCONCLUSIVE: {} configuration{} could not be judged, so this is not a "
                          "pass; run more iterations or repeats, or rerun on a quiet machine.",
                          c.inconclusive.size(), c.inconclusive.size() == 1 ? "" : "s")});
    if (!c.regressions.empty()) {
      Table t;
      t.header = {"regression"};
      for (const auto& r : c.regressions) {
        t.rows.push_back({r});
        t.row_class.push_back("worse");
      }
      summary.blocks.push_back(std::move(t));
    }
    for (const auto& n : c.inconclusive) summary.blocks.push_back(Paragraph{"Not judged by the gate: " + n + "."});
    for (const auto& n : c.notes) summary.blocks.push_back(Paragraph{"Not counted by the gate: " + n + "."});
  }
  bool few = false;
  for (const auto& p : c.pairs) few = few || p.metrics.front().verdict == Verdict::too_few_samples;
  if (few) {
    summary.blocks.push_back(
        Paragraph{fmt::format("Warning: some configurations have fewer than {} samples on a side; such a "
                              "comparison cannot reach significance reliably. Run more iterations or repeats.",
                              kMinSamples)});
  }
  if (!c.only_in_base.empty() || !c.only_in_new.empty() || !c.skipped.empty()) {
    Table t;
    t.caption = "Not compared";
    t.header = {"what", "why"};
    for (const auto& k : c.only_in_base) t.rows.push_back({k, "only in base"});
    for (const auto& k : c.only_in_new) t.rows.push_back({k, "only in new"});
    for (const auto& s : c.skipped) t.rows.push_back({s, "not a completed run"});
    t.row_class.assign(t.rows.size(), "warning");
    summary.blocks.push_back(std::move(t));
  }
  d.sections.push_back(std::move(summary));

  Section details{"Per configuration", {}, {}};
  for (const auto& p : c.pairs) {
    Section s{p.key.label(), {}, {}};
    s.blocks.push_back(
        Paragraph{fmt::format("Base runs {}; new runs {}.", runs_text(p.base_runs), runs_text(p.new_runs))});
    Table t;
    t.header = {"metric", "base median", "new median", "change [95% CI]", "p", "n base/new", "verdict"};
    t.numeric = {false, true, true, true, true, true, false};
    for (const auto& m : p.metrics) {
      t.rows.push_back({m.metric + " (" + m.unit + ")", three_digits(m.base_median), three_digits(m.new_median),
                        interval_text(m), m.verdict == Verdict::missing ? "" : fmt::format("{:.3g}", m.p_value),
                        fmt::format("{}/{}", m.base_n, m.new_n), std::string(to_string(m.verdict))});
      t.row_class.push_back(row_class(m.verdict));
    }
    s.blocks.push_back(std::move(t));
    Table mem;
    mem.caption = p.across_frameworks
                      ? "Memory: the resident memory training added at its peak, then the tensors at peak by category "
                        "where both frameworks kept them (one run a side)"
                      : "Memory at peak from the ledger (deterministic: compared exactly, in bytes)";
    mem.header = {"category", "base bytes", "new bytes", "change", "verdict"};
    mem.numeric = {false, true, true, true, false};
    for (const auto& m : p.memory) {
      mem.rows.push_back({m.category, with_commas(m.base_bytes), with_commas(m.new_bytes),
                          with_commas(m.new_bytes - m.base_bytes), std::string(to_string(m.verdict))});
      mem.row_class.push_back(row_class(m.verdict));
    }
    s.blocks.push_back(std::move(mem));
    if (!p.culprits.empty()) {
      Table moved;
      moved.caption = "Where the time moved: ops, kernels, layers and collective calls by their change in ms per "
                      "timed iteration (each side's mean over its runs), the significant first: Mann-Whitney on the "
                      "per-iteration times where every run stored them, against 0.05 / the number tested";
      moved.header = {"kind", "name", "base ms/iteration", "new ms/iteration", "change", "p"};
      moved.numeric = {false, false, true, true, true, true};
      for (const auto& k : p.culprits) {
        moved.rows.push_back({k.kind, k.name, three_digits(k.base_ms), three_digits(k.new_ms),
                              fmt::format("{:+.3g} ms{}", k.delta_ms(),
                                          k.base_ms > 0 ? " (" + signed_percent(k.new_ms / k.base_ms - 1) + ")" : ""),
                              k.p_value ? culprit_p_text(k) : "not tested"});
        moved.row_class.push_back(!k.significant ? "" : k.delta_ms() > 0 ? "worse" : "better");
      }
      s.blocks.push_back(std::move(moved));
    }
    for (const auto& n : p.notes) s.blocks.push_back(Paragraph{"Note: " + n});
    details.subsections.push_back(std::move(s));
  }
  d.sections.push_back(std::move(details));
  return d;
}

nlohmann::json comparison_json(const Comparison& c) {
  nlohmann::json j = {{"base", c.base_label},
                      {"new", c.new_label},
                      {"geomean_throughput_ratio", c.geomean_throughput_ratio},
                      {"only_in_base", c.only_in_base},
                      {"only_in_new", c.only_in_new},
                      {"skipped", c.skipped},
                      {"significance", kSignificance},
                      {"min_samples", kMinSamples},
                      {"min_repetitions", kMinRepetitions}};
  if (c.gated)
    j["gate"] = {{"passed", gate_decision(c) == "passed"},
                 {"decision", gate_decision(c)},
                 {"regressions", c.regressions},
                 {"inconclusive", c.inconclusive},
                 {"not_counted", c.notes}};
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& p : c.pairs) {
    nlohmann::json metrics = nlohmann::json::array(), memory = nlohmann::json::array();
    for (const auto& m : p.metrics) {
      metrics.push_back({{"metric", m.metric},
                         {"unit", m.unit},
                         {"higher_is_better", m.higher_is_better},
                         {"base_n", m.base_n},
                         {"new_n", m.new_n},
                         {"base_median", m.base_median},
                         {"new_median", m.new_median},
                         {"delta", m.delta},
                         {"delta_low", m.delta_low},
                         {"delta_high", m.delta_high},
                         {"p_value", m.p_value},
                         {"sample", m.sample},
                         {"autocorrelation", m.autocorrelation},
                         {"variance_inflation", m.variance_inflation},
                         {"verdict", std::string(to_string(m.verdict))}});
    }
    nlohmann::json culprits = nlohmann::json::array();
    for (const auto& k : p.culprits) {
      culprits.push_back({{"kind", k.kind},
                          {"name", k.name},
                          {"base_ms_per_iteration", k.base_ms},
                          {"new_ms_per_iteration", k.new_ms},
                          {"delta_ms_per_iteration", k.delta_ms()},
                          {"p_value", k.p_value ? nlohmann::json(*k.p_value) : nlohmann::json(nullptr)},
                          {"significant", k.significant}});
    }
    nlohmann::json differences = nlohmann::json::array();
    for (const auto& d : p.differences) differences.push_back({{"what", d.what}, {"base", d.base}, {"new", d.next}});
    for (const auto& m : p.memory) {
      memory.push_back({{"category", m.category},
                        {"base_bytes", m.base_bytes},
                        {"new_bytes", m.new_bytes},
                        {"verdict", std::string(to_string(m.verdict))}});
    }
    pairs.push_back({{"workload", p.key.workload},
                     {"preset", p.key.preset},
                     {"device", p.key.device},
                     {"batch", p.key.batch},
                     {"ranks", p.key.ranks},
                     {"base_runs", p.base_runs},
                     {"new_runs", p.new_runs},
                     {"base_run_throughput", p.base_run_throughput},
                     {"new_run_throughput", p.new_run_throughput},
                     {"metrics", metrics},
                     {"culprits", culprits},
                     {"memory", memory},
                     {"differences", differences},
                     {"notes", p.notes},
                     {"noisy_runs", p.noisy_runs}});
  }
  j["pairs"] = pairs;
  return j;
}

}  // namespace ts::reports
