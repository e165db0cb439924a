#include "reports/suite_report.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "fmt/format.h"
#include "reports/number_format.h"
#include "reports/op_class.h"
#include "reports/statistics.h"
#include "vocabulary/memory_category.h"

namespace ts::reports {

namespace {

constexpr size_t kTopOps = 8, kTopLayers = 8;
constexpr double kMiB = 1024.0 * 1024.0;
// A projection further from its measured run than this is marked in the report (issue 44 asks 90% of
// them within it).
constexpr double kProjectionErrorWarning = 0.10;

// A configuration's runs (its repeats), pooled: what the report shows per row.
struct Group {
  RunKey key;
  std::vector<const RunDigest*> runs, ok;                   // all, and the completed ones the figures use
  std::vector<double> throughput, iteration_ms;             // per timed iteration, pooled; throughput in `unit`
  std::vector<double> sustained;                            // each completed run's sustained headline, where stored
  std::vector<std::pair<std::string, double>> phase_ms;     // median per phase
  std::vector<std::pair<std::string, double>> phase_share;  // of the timed iterations' time, "unaccounted" last
  std::vector<std::pair<std::string, double>> class_ms;     // per timed iteration, by op class
  std::vector<OpTotal> ops;                                 // per timed iteration
  const RunDigest* first = nullptr;                         // the first completed run (memory, layers, breakdown)
  std::string unit = "samples/s";

  // The group's rate: the median of its runs' sustained rates (docs/formulas.md, "Throughput");
  // where a run stored none (before there was one), the median per iteration (`per_iteration`).
  bool per_iteration() const { return sustained.size() < ok.size(); }
  double rate() const {
    if (!per_iteration()) return sustained.empty() ? 0 : median(sustained);
    return throughput.empty() ? 0 : median(throughput);
  }
  double job_throughput() const { return rate() * static_cast<double>(key.ranks); }
  std::string rate_text(double v) const {
    return three_digits(v) + " " + unit + (per_iteration() ? " (median per iteration)" : "");
  }
};

std::vector<Group> group_runs(const std::vector<RunDigest>& runs) {
  std::map<RunKey, Group> by_key;
  std::vector<RunKey> order;
  for (const auto& r : runs) {
    auto [it, fresh] = by_key.try_emplace(r.key);
    if (fresh) order.push_back(r.key);
    Group& g = it->second;
    g.key = r.key;
    g.runs.push_back(&r);
    if (!r.finished_ok() || r.iteration_ms.empty()) continue;
    g.ok.push_back(&r);
    if (!g.first) g.first = &r;
    g.unit = r.unit;
    g.throughput.insert(g.throughput.end(), r.throughput_per_iteration.begin(), r.throughput_per_iteration.end());
    if (r.figures.sustained_headline && r.figures.sustained_headline->unit == r.unit)
      g.sustained.push_back(r.figures.sustained_headline->value);
    g.iteration_ms.insert(g.iteration_ms.end(), r.iteration_ms.begin(), r.iteration_ms.end());
  }
  std::vector<Group> out;
  for (const auto& key : order) {
    Group g = std::move(by_key[key]);
    std::map<std::string, std::vector<double>> phases;
    std::vector<std::string> phase_order;
    std::map<std::string, OpTotal> ops;
    std::map<std::string, std::vector<double>> medians;  // each repeat's median per iteration, where stored
    std::map<std::string, double> classes, share;
    double timed = 0, unaccounted = 0, with_phases = 0;
    for (const auto* r : g.ok) {
      for (const auto& p : r->phases) {
        if (!phases.contains(p.phase)) phase_order.push_back(p.phase);
        auto& v = phases[p.phase];
        v.insert(v.end(), p.ms.begin(), p.ms.end());
        share[p.phase] += p.share;
      }
      if (!r->phases.empty()) {
        unaccounted += r->unaccounted_share;
        ++with_phases;
      }
      for (const auto& o : r->ops) {
        auto& t = ops[o.name];
        t.name = o.name;
        t.count += o.count;
        t.total_ms += o.total_ms;
        if (o.median_ms_per_iteration) medians[o.name].push_back(*o.median_ms_per_iteration);
        classes[op_class(o.name)] += o.total_ms;
      }
      timed += static_cast<double>(r->iteration_ms.size());
    }
    for (const auto& name : phase_order) g.phase_ms.emplace_back(name, median(phases[name]));
    // Each run's shares add up to 1 with its unaccounted share (docs/formulas.md, "Phase
    // shares"); repeats of one configuration count alike.
    if (with_phases > 0) {
      for (const auto& name : phase_order) g.phase_share.emplace_back(name, share[name] / with_phases);
      g.phase_share.emplace_back("unaccounted", unaccounted / with_phases);
    }
    // Ops are summed over the runs' timed iterations (kernel_summary); per iteration reads better.
    for (auto& [name, t] : ops) {
      t.total_ms /= std::max(timed, 1.0);
      // The repeats' medians averaged; none unless every repeat stored one (an op absent from a
      // repeat, or a repeat written before v7, is not ranked by a median).
      const auto& m = medians[name];
      if (m.size() == g.ok.size())
        t.median_ms_per_iteration = std::accumulate(m.begin(), m.end(), 0.0) / static_cast<double>(m.size());
      g.ops.push_back(t);
    }
    rank_ops(g.ops);
    for (auto& [cls, total] : classes) g.class_ms.emplace_back(cls, total / std::max(timed, 1.0));
    std::stable_sort(g.class_ms.begin(), g.class_ms.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    out.push_back(std::move(g));
  }
  return out;
}

// The measurement conditions of a configuration's runs (each judged by its digest): "clean", or how
// many were noisy or not recorded.
std::string conditions_text(const Group& g) {
  size_t noisy = 0, unknown = 0;
  for (const auto* r : g.runs) {
    noisy += r->conditions.noisy();
    unknown += r->conditions.verdict == Conditions::Verdict::unknown;
  }
  const size_t n = g.runs.size();
  if (noisy > 0) return fmt::format("noisy ({} of {})", noisy, n);
  if (unknown == n) return "unknown";
  if (unknown > 0) return fmt::format("clean ({} of {} unknown)", unknown, n);
  return "clean";
}

// " (2 of 60 far slower)": the repeats' outlier iterations (RunDigest::outliers), or "".
std::string outliers_text(const Group& g) {
  size_t count = 0, of = 0;
  for (const auto* r : g.ok) {
    of += r->iteration_ms.size();
    if (r->outliers) count += r->outliers->count;
  }
  return count == 0 ? "" : fmt::format(" ({} of {} far slower)", count, of);
}

// A row's class where its figures were measured on a busy machine (the report marks it).
std::string noise_class(const Group& g) { return conditions_text(g).starts_with("noisy") ? "warning" : ""; }

std::string peak_text(const Group& g) { return g.first ? human_bytes(static_cast<double>(g.first->peak_bytes)) : "-"; }

nlohmann::json stacked_bar(const std::vector<std::string>& labels,
                           const std::vector<std::pair<std::string, std::vector<double>>>& series,
                           const std::string& axis, bool horizontal, bool percent = true) {
  nlohmann::json datasets = nlohmann::json::array();
  for (const auto& [name, values] : series) datasets.push_back({{"label", name}, {"data", values}});
  const std::string value_axis = horizontal ? "x" : "y", label_axis = horizontal ? "y" : "x";
  return {{"type", "bar"},
          {"data", {{"labels", labels}, {"datasets", datasets}}},
          {"options",
           {{"indexAxis", horizontal ? "y" : "x"},
            {"scales",
             {{value_axis,
               percent ? nlohmann::json{{"stacked", true}, {"max", 100}, {"title", {{"display", true}, {"text", axis}}}}
                       : nlohmann::json{{"stacked", true}, {"title", {{"display", true}, {"text", axis}}}}},
              {label_axis, {{"stacked", true}}}}}}}};
}

// One series per category over the groups, as percentages of each group's total.
std::vector<std::pair<std::string, std::vector<double>>> shares(
    const std::vector<std::string>& categories, const std::vector<std::map<std::string, double>>& per_group) {
  std::vector<std::pair<std::string, std::vector<double>>> out;
  for (const auto& c : categories) {
    std::vector<double> v;
    for (const auto& m : per_group) {
      double total = 0;
      for (const auto& [_, x] : m) total += x;
      v.push_back(total > 0 && m.contains(c) ? 100.0 * m.at(c) / total : 0.0);
    }
    out.emplace_back(c, v);
  }
  return out;
}

int chart_height(size_t bars) { return static_cast<int>(std::clamp<size_t>(60 + 28 * bars, 200, 900)); }

// A stacked-bar chart of each labelled whole's parts as percentages of it.
Chart share_chart(std::string title, std::string alt_text, const std::vector<std::string>& labels,
                  const std::vector<std::string>& parts, const std::vector<std::map<std::string, double>>& per_label,
                  const std::string& axis) {
  Chart c;
  c.title = std::move(title);
  c.alt_text = std::move(alt_text);
  c.config = stacked_bar(labels, shares(parts, per_label), axis, true);
  c.height = chart_height(labels.size());
  return c;
}

// The share chart of each group's parts (phases, op classes); nothing when no group has parts.
void add_share_chart(Section& s, const std::vector<Group>& groups,
                     std::vector<std::pair<std::string, double>> Group::*parts, const std::string& title,
                     const std::string& alt_text, const std::string& axis) {
  std::vector<std::string> labels, names;
  std::vector<std::map<std::string, double>> per_group;
  for (const auto& g : groups) {
    if ((g.*parts).empty()) continue;
    labels.push_back(g.key.label());
    std::map<std::string, double> m;
    for (const auto& [name, v] : g.*parts) {
      m[name] = v;
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    per_group.push_back(m);
  }
  if (!labels.empty()) s.blocks.push_back(share_chart(title, alt_text, labels, names, per_group, axis));
}

Section summary_section(const std::vector<Group>& groups) {
  Section s{"Summary", {}, {}};
  Table t;
  t.caption =
      "Per configuration (workload, preset, device, batch per rank, ranks): throughput is one rank's, sustained (the "
      "timed iterations' work over their time; the median over repeats), in the workload's unit, with the median and "
      "p10-p90 of the per-iteration rates pooled over repeats beside it; iteration ms: the median, with the "
      "iterations far slower than the rest counted (beyond Q3 + 3 IQR of their run); peak memory from the ledger "
      "(rank 0).";
  t.header = {"configuration",
              "runs ok/all",
              "throughput (sustained)",
              "per iteration: median (p10-p90)",
              "iteration ms",
              "job throughput",
              "peak memory",
              "conditions"};
  t.numeric = {false, true, true, true, true, true, true, false};
  for (const auto& g : groups) {
    const bool ok = !g.throughput.empty();
    t.rows.push_back(
        {g.key.label(), fmt::format("{}/{}", g.ok.size(), g.runs.size()), ok ? g.rate_text(g.rate()) : "-",
         ok ? fmt::format("{} ({}-{})", three_digits(median(g.throughput)), three_digits(quantile(g.throughput, 0.1)),
                          three_digits(quantile(g.throughput, 0.9)))
            : "-",
         ok ? three_digits(median(g.iteration_ms)) + outliers_text(g) : "-",
         ok && g.key.ranks > 1 ? g.rate_text(g.job_throughput()) : "", peak_text(g), conditions_text(g)});
    t.row_class.push_back(g.ok.empty() ? "failed" : g.ok.size() < g.runs.size() ? "warning" : noise_class(g));
  }
  s.blocks.push_back(std::move(t));
  s.blocks.push_back(Paragraph{fmt::format(
      "Conditions: whether the machine gave each run what it asked for over its timed iterations. A run is noisy "
      "when it got less than {:g}% of the CPU its threads asked for, other processes used more than {:g} cores, "
      "the hypervisor stole more than {:g}% of the CPU time, or the load was over {:g} per core when it began "
      "(docs/formulas.md, \"Measurement conditions\"); a noisy run's figures measure the machine's other work as "
      "much as the workload, and comparisons with it mislead. Unknown: stored before conditions were recorded.",
      NoiseThresholds::min_cpu_got_of_asked_percent, NoiseThresholds::max_other_processes_cores,
      NoiseThresholds::max_steal_percent, NoiseThresholds::max_load_per_core_at_start)});

  // Where the time goes, comparable across configurations of very different speed: shares of
  // each phase in the median iteration, and of each op class in the traced op time.
  add_share_chart(s, groups, &Group::phase_share, "Time per phase (% of the timed iterations' time)",
                  "Stacked bars: each configuration's phases, and the time no phase covers, as shares of its timed "
                  "iterations' time; the per-configuration tables have the ms.",
                  "% of the timed iterations' time");
  add_share_chart(s, groups, &Group::class_ms, "Op time by class (% of traced op time)",
                  "Stacked bars: each configuration's traced CPU op time by op class (convolution, matrix multiply, "
                  "element-wise, ...).",
                  "% of op time");
  return s;
}

// The median over a group's completed runs of a whole-run metric; unset where none stored it.
std::optional<double> metric_median(const Group& g, const std::string& name) {
  std::vector<double> v;
  for (const auto* r : g.ok) {
    if (const auto it = r->metrics.find(name); it != r->metrics.end()) v.push_back(it->second);
  }
  if (v.empty()) return std::nullopt;
  return median(v);
}

// TBD's framework dimension (issue 42): each configuration that also ran in another framework
// (`run --framework pytorch`), the two side by side. Empty where no configuration did.
std::optional<Section> frameworks_section(const std::vector<Group>& groups) {
  std::map<RunKey, const Group*> by_key;
  for (const auto& g : groups) by_key[g.key] = &g;
  Table t;
  t.caption =
      "Each configuration trainscope and another framework both ran: sustained throughput in the workload's unit "
      "(the median over repeats; the other framework's from its iterations run without its profiler where it ran "
      "them so, as `run --framework pytorch` does: PyTorch's profiler slowed deepspeech2's tiny ops 2.3x) and the "
      "resident memory training added at its peak (rss_peak_growth_bytes, the other's without its profiler too), "
      "with trainscope / other. `compare` gives the statistics (over the profiled iterations on both sides) and the "
      "per-layer deltas.";
  t.header = {"configuration", "framework", "trainscope", "other", "ratio", "RSS growth trainscope / other", "ratio"};
  t.numeric = {false, false, true, true, true, true, true};
  for (const auto& g : groups) {
    if (g.key.framework == "trainscope" || g.ok.empty()) continue;
    const auto native = by_key.find(g.key.with_framework("trainscope"));
    if (native == by_key.end() || native->second->ok.empty()) continue;
    const Group& n = *native->second;
    const auto rss_n = metric_median(n, "rss_peak_growth_bytes"), rss_o = metric_median(g, "rss_peak_growth_bytes");
    // The other framework at its best: its iterations without its profiler where it ran them so.
    const double other = metric_median(g, "unprofiled_headline_throughput").value_or(g.rate());
    const bool rates = n.rate() > 0 && other > 0 && n.unit == g.unit;
    t.rows.push_back({n.key.label(), g.key.framework, n.rate_text(n.rate()), g.rate_text(other),
                      rates ? fmt::format("{:.2f}", n.rate() / other) : "-",
                      rss_n && rss_o ? fmt::format("{} / {}", human_bytes(*rss_n), human_bytes(*rss_o)) : "-",
                      rss_n && rss_o && *rss_o > 0 ? fmt::format("{:.2f}", *rss_n / *rss_o) : "-"});
    t.row_class.push_back(noise_class(n) == "warning" || noise_class(g) == "warning" ? "warning" : "");
  }
  if (t.rows.empty()) return std::nullopt;
  Section s{"Frameworks side by side", {}, {}};
  s.blocks.push_back(std::move(t));
  return s;
}

// TBD's classes in the order of its figure.
const std::vector<std::string> kTbdClasses(vocabulary::kTbdClasses.begin(), vocabulary::kTbdClasses.end());

Section memory_section(const std::vector<Group>& groups) {
  Section s{"Memory at peak", {}, {}};
  std::vector<std::string> labels, categories, classes;
  std::vector<std::map<std::string, double>> ours, tbd;
  Table t;
  t.caption = "MiB live at the ledger's peak (rank 0), in TBD's five classes; each configuration's section splits them "
              "by category";
  t.header = {"configuration", "peak"};
  t.header.insert(t.header.end(), kTbdClasses.begin(), kTbdClasses.end());
  t.numeric.assign(t.header.size(), true);
  t.numeric[0] = false;
  for (const auto& g : groups) {
    if (!g.first || g.first->memory.empty()) continue;
    labels.push_back(g.key.label());
    std::map<std::string, double> mine, theirs;
    for (const auto& m : g.first->memory) {
      mine[m.category] += static_cast<double>(m.bytes) / kMiB;
      theirs[m.tbd_class.empty() ? "?" : m.tbd_class] += static_cast<double>(m.bytes) / kMiB;
      if (std::find(categories.begin(), categories.end(), m.category) == categories.end())
        categories.push_back(m.category);
    }
    std::vector<std::string> row = {g.key.label(),
                                    fmt::format("{:.1f}", static_cast<double>(g.first->peak_bytes) / kMiB)};
    for (const auto& cls : kTbdClasses) row.push_back(theirs.contains(cls) ? fmt::format("{:.1f}", theirs[cls]) : "0");
    t.rows.push_back(std::move(row));
    ours.push_back(mine);
    tbd.push_back(theirs);
  }
  if (labels.empty()) {
    s.blocks.push_back(Paragraph{"No run kept a memory peak."});
    return s;
  }
  classes = kTbdClasses;
  for (const auto& m : tbd) {
    for (const auto& [cls, _] : m) {
      if (std::find(classes.begin(), classes.end(), cls) == classes.end()) classes.push_back(cls);
    }
  }
  s.blocks.push_back(std::move(t));
  // The sizes first (configurations differ by orders of magnitude), then the shares.
  std::vector<std::pair<std::string, std::vector<double>>> mib;
  for (const auto& c : categories) {
    std::vector<double> v;
    for (const auto& m : ours) v.push_back(m.contains(c) ? m.at(c) : 0.0);
    mib.emplace_back(c, v);
  }
  Chart sizes;
  sizes.title = "Memory at peak by category (MiB)";
  sizes.alt_text = "Stacked bars: each configuration's peak memory in MiB, split by the ledger's categories.";
  sizes.config = stacked_bar(labels, mib, "MiB at peak", true, false);
  sizes.height = chart_height(labels.size());
  s.blocks.push_back(std::move(sizes));
  s.blocks.push_back(share_chart("Memory at peak by category (% of peak)",
                                 "Stacked bars: each configuration's peak memory split by the ledger's categories.",
                                 labels, categories, ours, "% of peak bytes"));
  s.blocks.push_back(share_chart(
      "Memory at peak in TBD's five classes (% of peak)",
      "Stacked bars: the same peaks in TBD's classes (weights, gradients, feature maps, workspace, dynamic).", labels,
      classes, tbd, "% of peak bytes"));
  return s;
}

// The p10-p90 band of a curve as two datasets, the upper filled down to the lower: Chart.js has
// no error bars of its own.
nlohmann::json band_datasets(const nlohmann::json& low, const nlohmann::json& high) {
  const nlohmann::json hidden_point = {{"pointRadius", 0}, {"borderWidth", 0}, {"borderColor", "rgba(0,0,0,0)"}};
  nlohmann::json lo = {{"label", "p10"}, {"data", low}, {"fill", false}};
  nlohmann::json hi = {{"label", "p90 (band: p10-p90 over the iterations)"},
                       {"data", high},
                       {"fill", "-1"},
                       {"backgroundColor", "rgba(0,114,178,0.15)"}};
  lo.update(hidden_point);
  hi.update(hidden_point);
  return nlohmann::json::array({lo, hi});
}

// Curves where a suite varied one thing: ranks (scaling) or batch (throughput versus batch).
Section curves_section(const std::vector<Group>& groups) {
  Section s{"Scaling and batch size", {}, {}};
  std::map<std::tuple<std::string, std::string, std::string, int64_t>, std::vector<const Group*>>
      by_ranks;  // fixed batch
  std::map<std::tuple<std::string, std::string, std::string, int64_t>, std::vector<const Group*>>
      by_batch;  // fixed ranks
  for (const auto& g : groups) {
    if (g.throughput.empty()) continue;
    by_ranks[{g.key.workload, g.key.preset, g.key.device, g.key.batch}].push_back(&g);
    by_batch[{g.key.workload, g.key.preset, g.key.device, g.key.ranks}].push_back(&g);
  }
  for (auto& [k, v] : by_ranks) {
    if (v.size() < 2) continue;
    std::sort(v.begin(), v.end(), [](const Group* a, const Group* b) { return a->key.ranks < b->key.ranks; });
    nlohmann::json measured = nlohmann::json::array(), ideal = nlohmann::json::array(), low = nlohmann::json::array(),
                   high = nlohmann::json::array();
    const double one = v.front()->job_throughput() / static_cast<double>(v.front()->key.ranks);
    Table t;
    t.caption = fmt::format("{}/{} {} batch {} per rank: job throughput against ranks", std::get<0>(k), std::get<1>(k),
                            std::get<2>(k), std::get<3>(k));
    t.header = {"ranks", "job throughput", "scaling efficiency", "conditions"};
    t.numeric = {true, true, true, false};
    for (const auto* g : v) {
      const double r = static_cast<double>(g->key.ranks);
      measured.push_back({{"x", r}, {"y", g->job_throughput()}});
      ideal.push_back({{"x", r}, {"y", one * r}});
      // The job's rate spreads as one rank's does: ranks x that rank's p10 and p90.
      low.push_back({{"x", r}, {"y", r * quantile(g->throughput, 0.1)}});
      high.push_back({{"x", r}, {"y", r * quantile(g->throughput, 0.9)}});
      t.rows.push_back({std::to_string(g->key.ranks), g->rate_text(g->job_throughput()),
                        fmt::format("{:.0f}%", 100.0 * g->job_throughput() / (one * r)), conditions_text(*g)});
      t.row_class.push_back(noise_class(*g));
    }
    Chart c;
    c.title = t.caption;
    c.alt_text = "Line chart: measured job throughput (sustained) against ranks with the p10-p90 band of the "
                 "per-iteration rates, beside linear scaling from the smallest run.";
    nlohmann::json datasets = {{{"label", "measured (sustained)"}, {"data", measured}},
                               {{"label", "linear scaling"}, {"data", ideal}, {"borderDash", {6, 4}}}};
    for (auto& d : band_datasets(low, high)) datasets.push_back(d);
    c.config = {{"type", "line"},
                {"data", {{"datasets", datasets}}},
                {"options",
                 {{"scales",
                   {{"x",
                     {{"type", "linear"},
                      {"ticks", {{"stepSize", 1}, {"precision", 0}}},  // ranks are whole
                      {"title", {{"display", true}, {"text", "ranks"}}}}},
                    {"y", {{"beginAtZero", true}, {"title", {{"display", true}, {"text", v.front()->unit}}}}}}}}}};
    s.blocks.push_back(std::move(c));
    s.blocks.push_back(std::move(t));
  }
  for (auto& [k, v] : by_batch) {
    if (v.size() < 2) continue;
    std::sort(v.begin(), v.end(), [](const Group* a, const Group* b) { return a->key.batch < b->key.batch; });
    nlohmann::json points = nlohmann::json::array(), low = nlohmann::json::array(), high = nlohmann::json::array();
    Table t;
    t.caption = fmt::format("{}/{} {}{}: throughput per rank against batch size", std::get<0>(k), std::get<1>(k),
                            std::get<2>(k), std::get<3>(k) > 1 ? fmt::format(" x{} ranks", std::get<3>(k)) : "");
    t.header = {"batch per rank", "throughput (sustained)", "per iteration: p10-p90", "conditions"};
    t.numeric = {true, true, true, false};
    for (const auto* g : v) {
      t.rows.push_back({std::to_string(g->key.batch), g->rate_text(g->rate()),
                        three_digits(quantile(g->throughput, 0.1)) + "-" + three_digits(quantile(g->throughput, 0.9)),
                        conditions_text(*g)});
      t.row_class.push_back(noise_class(*g));
      points.push_back({{"x", g->key.batch}, {"y", g->rate()}});
      low.push_back({{"x", g->key.batch}, {"y", quantile(g->throughput, 0.1)}});
      high.push_back({{"x", g->key.batch}, {"y", quantile(g->throughput, 0.9)}});
    }
    nlohmann::json datasets = {{{"label", "throughput (sustained)"}, {"data", points}}};
    for (auto& d : band_datasets(low, high)) datasets.push_back(d);
    Chart c;
    c.title = fmt::format("{}/{} {}{}: throughput against batch size", std::get<0>(k), std::get<1>(k), std::get<2>(k),
                          std::get<3>(k) > 1 ? fmt::format(" x{} ranks", std::get<3>(k)) : "");
    c.alt_text = "Line chart: sustained throughput per rank at each batch size with the p10-p90 band of the "
                 "per-iteration rates; the table below has the numbers.";
    c.config = {{"type", "line"},
                {"data", {{"datasets", datasets}}},
                {"options",
                 {{"scales",
                   {{"x", {{"type", "logarithmic"}, {"title", {{"display", true}, {"text", "batch per rank"}}}}},
                    {"y", {{"beginAtZero", true}, {"title", {{"display", true}, {"text", v.front()->unit}}}}}}}}}};
    s.blocks.push_back(std::move(c));
    s.blocks.push_back(std::move(t));
  }
  if (s.blocks.empty())
    s.blocks.push_back(
        Paragraph{"The selection has no configurations that differ only in ranks or only in batch size."});
  return s;
}

Section group_section(const Group& g) {
  Section s{g.key.label(), {}, {}};
  std::vector<std::string> ids;
  for (const auto* r : g.runs) ids.push_back(fmt::format("{} ({}, {})", r->run.id, r->status, r->conditions.label()));
  s.blocks.push_back(Paragraph{fmt::format("Runs: {}.", fmt::join(ids, ", "))});
  for (const auto* r : g.runs) {  // each noisy run's reasons, and what the machine gave it
    if (r->conditions.noisy()) {
      s.blocks.push_back(Paragraph{
          fmt::format("Run {} was {}. ({})", r->run.id, r->conditions.verdict_line(), r->conditions.figures_line())});
    }
  }
  if (g.ok.empty()) {
    s.blocks.push_back(Paragraph{"No run of this configuration completed; see \"Runs that did not complete\"."});
    return s;
  }
  Table ph;
  ph.caption = "Time per phase: median ms per timed iteration (medians need not add up), and its share of the timed "
               "iterations' time (the shares do, with the unaccounted share)";
  ph.header = {"phase", "ms", "share"};
  ph.numeric = {false, true, true};
  for (const auto& [p, v] : g.phase_ms) {
    const auto at =
        std::find_if(g.phase_share.begin(), g.phase_share.end(), [&](const auto& x) { return x.first == p; });
    ph.rows.push_back({p, three_digits(v), at == g.phase_share.end() ? "" : fmt::format("{:.1f}%", 100 * at->second)});
  }
  if (!g.phase_share.empty()) {
    std::vector<double> unaccounted;
    for (const auto* r : g.ok) {
      if (r->unaccounted_median_ms) unaccounted.push_back(*r->unaccounted_median_ms);
    }
    ph.rows.push_back({"unaccounted", unaccounted.empty() ? "" : three_digits(median(unaccounted)),
                       fmt::format("{:.1f}%", 100 * g.phase_share.back().second)});
  }
  s.blocks.push_back(std::move(ph));

  if (!g.ops.empty()) {
    double total = 0;
    for (const auto& o : g.ops) total += o.total_ms;
    Table cls;
    cls.caption = "Op time by class (ms per timed iteration, traced CPU ops)";
    cls.header = {"class", "ms", "share"};
    cls.numeric = {false, true, true};
    for (const auto& [c, v] : g.class_ms)
      cls.rows.push_back({c, three_digits(v), fmt::format("{:.1f}%", 100 * v / total)});
    s.blocks.push_back(std::move(cls));
    Table ops;
    ops.caption = fmt::format("Top {}, slowest first by the median ms of a timed iteration (docs/formulas.md, "
                              "\"Rankings\"; by the mean where the run stored no median), with the mean and the share",
                              counted(static_cast<int64_t>(std::min(kTopOps, g.ops.size())), "op"));
    ops.header = {"op", "class", "calls per iteration", "median ms", "mean ms", "share"};
    ops.numeric = {false, false, true, true, true, true};
    double timed = 0;
    for (const auto* r : g.ok) timed += static_cast<double>(r->iteration_ms.size());
    for (size_t i = 0; i < std::min(kTopOps, g.ops.size()); ++i) {
      const auto& o = g.ops[i];
      ops.rows.push_back({o.name, op_class(o.name), three_digits(static_cast<double>(o.count) / std::max(timed, 1.0)),
                          o.median_ms_per_iteration ? three_digits(*o.median_ms_per_iteration) : "-",
                          three_digits(o.total_ms), fmt::format("{:.1f}%", 100 * o.total_ms / total)});
    }
    s.blocks.push_back(std::move(ops));
  } else {
    s.blocks.push_back(Paragraph{"No per-op events (run with tracing off)."});
  }

  if (!g.first->memory.empty()) {
    Table mem;
    mem.caption =
        fmt::format("Memory at peak of run {} by category (the ledger; deterministic for a build, model and batch)",
                    g.first->run.id);
    mem.header = {"category", "TBD class", "bytes", "share"};
    mem.numeric = {false, false, true, true};
    for (const auto& m : g.first->memory) {
      mem.rows.push_back({m.category, m.tbd_class, with_commas(m.bytes),
                          fmt::format("{:.1f}%", 100.0 * static_cast<double>(m.bytes) /
                                                     static_cast<double>(std::max<int64_t>(g.first->peak_bytes, 1)))});
    }
    s.blocks.push_back(std::move(mem));
  }

  auto layers = slowest_first(g.first->layers);
  if (!layers.empty()) {
    Table lt;
    // Self figures, as stored: a block's row holds its own ops (a residual add, its ReLU) and its own
    // parameters, its sub-layers have rows of their own.
    lt.caption =
        fmt::format("Slowest {} of run {}, by the median ms of a timed iteration in each layer's own ops "
                    "(forward + backward; forward and backward: their means), sub-layers apart; its own activations "
                    "and parameters",
                    counted(static_cast<int64_t>(std::min(kTopLayers, layers.size())), "layer"), g.first->run.id);
    lt.header = {"layer", "median ms", "forward ms", "backward ms", "activations", "parameters"};
    lt.numeric = {false, true, true, true, true, true};
    for (size_t i = 0; i < std::min(kTopLayers, layers.size()); ++i) {
      const auto& l = layers[i];
      lt.rows.push_back({l.layer, l.median_ms ? three_digits(*l.median_ms) : "-", three_digits(l.forward_ms),
                         three_digits(l.backward_ms), human_bytes(static_cast<double>(l.activation_bytes)),
                         with_commas(l.parameters)});
    }
    s.blocks.push_back(std::move(lt));
    std::stable_sort(layers.begin(), layers.end(),
                     [](const LayerTotal& a, const LayerTotal& b) { return a.activation_bytes > b.activation_bytes; });
    nlohmann::json labels = nlohmann::json::array(), values = nlohmann::json::array();
    for (size_t i = 0; i < std::min<size_t>(12, layers.size()); ++i) {
      labels.push_back(layers[i].layer);
      values.push_back(static_cast<double>(layers[i].activation_bytes) / kMiB);
    }
    Chart c;
    c.title = "Activation memory per layer (MiB, the 12 largest)";
    c.alt_text = "Bars: the layers that keep the most activation memory for backward.";
    c.config = {{"type", "bar"},
                {"data", {{"labels", labels}, {"datasets", {{{"label", "activations (MiB)"}, {"data", values}}}}}},
                {"options", {{"indexAxis", "y"}, {"plugins", {{"legend", {{"display", false}}}}}}}};
    c.height = chart_height(labels.size());
    s.blocks.push_back(std::move(c));
  }

  if (!g.first->breakdown.empty()) {
    Table bt;
    bt.caption = fmt::format("Time breakdown per rank of run {} (median ms per timed iteration; docs/formulas.md)",
                             g.first->run.id);
    bt.header = {"rank", "iteration", "compute", "comm", "overlap", "exposed comm", "idle"};
    bt.numeric = {true, true, true, true, true, true, true};
    // Interference (part of compute; a mean per timed iteration), where the run measured it.
    const auto& interference = g.first->interference;
    if (!interference.empty()) {
      bt.caption += "; interference: compute slowed by communication beside it, mean per timed iteration, "
                    "\"-\" where not measured";
      bt.header.push_back("interference");
      bt.numeric.push_back(true);
    }
    std::vector<std::string> labels;
    std::vector<double> compute_only, overlap, exposed, idle;
    for (const auto& b : g.first->breakdown) {
      bt.rows.push_back({std::to_string(b.rank), three_digits(b.iteration_ms), three_digits(b.compute_ms),
                         three_digits(b.comm_ms), three_digits(b.overlap_ms), three_digits(b.exposed_comm_ms),
                         three_digits(b.idle_ms)});
      if (!interference.empty()) {
        const auto at = std::find_if(interference.begin(), interference.end(),
                                     [&](const Interference& f) { return f.rank == b.rank; });
        bt.rows.back().push_back(at == interference.end() ? "-" : three_digits(at->interference_ms));
      }
      labels.push_back(fmt::format("rank {}", b.rank));
      compute_only.push_back(b.compute_ms - b.overlap_ms);
      overlap.push_back(b.overlap_ms);
      exposed.push_back(b.exposed_comm_ms);
      idle.push_back(b.idle_ms);
    }
    s.blocks.push_back(std::move(bt));
    Chart c;
    c.title = "Compute, communication and idle time per rank (ms, median iteration)";
    c.alt_text =
        "Stacked bars per rank: compute alone, compute overlapped with communication, exposed communication, idle.";
    c.config = stacked_bar(
        labels, {{"compute only", compute_only}, {"overlap", overlap}, {"exposed comm", exposed}, {"idle", idle}}, "ms",
        true, false);
    c.height = chart_height(labels.size());
    s.blocks.push_back(std::move(c));
  }

  // Issue 41: the collectives' time per rank split into waiting for the last rank and moving data
  // (reports/collective_split.h), on rank 0's clock; the straggler named.
  if (!g.first->wait_move.empty()) {
    const RunDigest& d = *g.first;
    Table wt;
    wt.caption = fmt::format(
        "Collectives of run {} split into waiting for the last rank and moving data (ms per timed iteration, {} "
        "calls on rank 0's clock, good to {} us; docs/formulas.md, \"Waiting and moving\")",
        d.run.id, d.split_calls, three_digits(static_cast<double>(d.wait_move_uncertainty_ns) / 1e3));
    wt.header = {
        "rank", "waiting", "moving", "busbw of the moving (GB/s)", "last to arrive (calls)", "others waited for it"};
    wt.numeric = {true, true, true, true, true, true};
    std::vector<std::string> labels;
    std::vector<double> waiting, moving;
    for (const auto& r : d.wait_move) {
      wt.rows.push_back({std::to_string(r.rank), three_digits(r.waiting_ms), three_digits(r.moving_ms),
                         three_digits(r.moving_busbw_gbps), std::to_string(r.last_arrivals),
                         three_digits(r.others_waited_ms)});
      labels.push_back(fmt::format("rank {}", r.rank));
      waiting.push_back(r.waiting_ms);
      moving.push_back(r.moving_ms);
    }
    s.blocks.push_back(std::move(wt));
    if (const RankWaitMove* straggler = d.straggler()) {
      s.blocks.push_back(Paragraph{fmt::format(
          "Straggler: rank {}, last to arrive in {} of {} calls; the others waited {} ms per timed iteration for it.",
          straggler->rank, straggler->last_arrivals, d.split_calls, three_digits(straggler->others_waited_ms))});
    }
    if (d.incomplete_calls > 0) {
      s.blocks.push_back(
          Paragraph{fmt::format("{} left out: some rank has no row for them.", counted(d.incomplete_calls, "call"))});
    }
    Chart c;
    c.title = "Collectives per rank: waiting for the last rank and moving data (ms per timed iteration)";
    c.alt_text = "Stacked bars per rank: time in collectives spent waiting for the last rank to arrive, and moving "
                 "data after it arrived.";
    c.config = stacked_bar(labels, {{"waiting", waiting}, {"moving", moving}}, "ms", true, false);
    c.height = chart_height(labels.size());
    s.blocks.push_back(std::move(c));
  }
  return s;
}

Section failures_section(const std::vector<RunDigest>& runs) {
  Section s{"Runs that did not complete", {}, {}};
  Table t;
  t.header = {"run", "configuration", "status", "timed iterations kept", "why"};
  t.numeric = {true, false, false, true, false};
  for (const auto& r : runs) {
    if (r.finished_ok()) continue;
    std::string why = r.run.error;
    if (why.empty() && r.status == "lost") why = "its writer is gone (killed or crashed); it keeps what it streamed";
    if (why.empty() && r.status == "stalled") why = "its writer is there but the run does not advance (stopped, hung)";
    if (why.empty() && r.status.starts_with("running")) why = "still being written";
    t.rows.push_back({std::to_string(r.run.id), r.key.label(), r.status, std::to_string(r.iteration_ms.size()), why});
    t.row_class.push_back("failed");
  }
  if (t.rows.empty()) {
    s.blocks.push_back(Paragraph{"Every selected run completed."});
  } else {
    s.blocks.push_back(
        Paragraph{"These runs are left out of the figures above (a configuration's other repeats still count)."});
    s.blocks.push_back(std::move(t));
  }
  return s;
}

// A projection's knobs in a few words, from its stored knobs_json.
std::string knobs_words(const store::ProjectionRow& p) {
  const auto k = nlohmann::json::parse(p.knobs_json, nullptr, false);
  if (!k.is_object()) return p.strategy;
  if (p.strategy == "ps") return fmt::format("ps sync, {:g} MiB keys", k.value("chunk_mb", 1.0));
  std::string s = k.value("priority", false) ? fmt::format("priority, {:g} MiB", k.value("partition_mb", 4.0))
                                             : fmt::format("{:g} MiB buckets", k.value("bucket_mb", 25.0));
  if (!k.value("overlap", true)) s += ", no overlap";
  return s;
}

// Every selected multi-rank run set against its projections (the error ledger, issue 44).
std::optional<Section> projections_section(const std::vector<RunDigest>& runs) {
  Table t;
  t.caption = "Projected against measured: the median iteration of rank 0; error = projected / measured - 1";
  t.header = {"configuration", "measured run", "projection run", "knobs",
              "link",          "projected ms", "measured ms",    "error"};
  t.numeric = {false, true, true, false, false, true, true, true};
  std::vector<double> errors;
  for (const auto& r : runs) {
    for (const auto& p : r.projections) {
      if (!p.error) continue;
      errors.push_back(std::abs(*p.error));
      t.rows.push_back({r.key.label(), std::to_string(r.run.id), std::to_string(p.run_id), knobs_words(p), p.link,
                        fmt::format("{:.1f}", p.projected_ns / 1e6), fmt::format("{:.1f}", p.measured_ns / 1e6),
                        fmt::format("{:+.1f}%", 100 * *p.error)});
      t.row_class.push_back(std::abs(*p.error) > kProjectionErrorWarning ? "warning" : "");
    }
  }
  if (t.rows.empty()) return std::nullopt;
  Section s{"Projections against measured", {}, {}};
  s.blocks.push_back(std::move(t));
  s.blocks.push_back(Paragraph{fmt::format(
      "{} projections: |error| median {:.1f}%, 90th percentile {:.1f}%{}. Rows beyond {:.0f}% are marked. "
      "docs/projection.md says what the model assumes.",
      errors.size(), 100 * median(errors), 100 * quantile(errors, 0.9),
      errors.size() < 10 ? " (fewer than 10: the percentile is rough)" : "", 100 * kProjectionErrorWarning)});
  return s;
}

Section environment_section(const std::vector<RunDigest>& runs) {
  Section s{"Environment", {}, {}};
  const RunDigest* first = nullptr;
  for (const auto& r : runs) {
    if (!r.environment.empty()) {
      first = &r;
      break;
    }
  }
  if (!first) {
    s.blocks.push_back(Paragraph{"No environment was recorded."});
    return s;
  }
  // Entries every run shares are shown once; where runs differ, the table says so.
  Table t;
  t.caption = fmt::format("As run {} recorded it", first->run.id);
  t.header = {"key", "value", "same in every run"};
  for (const auto& e : first->environment) {
    if (e.key == "launch_token") continue;
    bool same = true;
    for (const auto& r : runs) {
      const auto it = std::find_if(r.environment.begin(), r.environment.end(),
                                   [&](const store::EnvEntry& x) { return x.key == e.key; });
      same = same && (r.environment.empty() || (it != r.environment.end() && it->value == e.value));
    }
    t.rows.push_back({e.key, e.value, same ? "yes" : "no"});
    t.row_class.push_back(same ? "" : "warning");
  }
  s.blocks.push_back(std::move(t));
  return s;
}

}  // namespace

Document suite_report_document(const std::vector<RunDigest>& runs, const std::string& source) {
  Document d;
  d.title = "trainscope suite report";
  std::set<std::string> suites;
  for (const auto& r : runs) {
    if (!r.suite.empty()) suites.insert(r.suite);
  }
  d.subtitle = fmt::format("{} · {} run{}{}", source, runs.size(), runs.size() == 1 ? "" : "s",
                           suites.empty() ? "" : fmt::format(" · suite {}", fmt::join(suites, ", ")));
  const auto groups = group_runs(runs);
  d.sections.push_back(summary_section(groups));
  if (auto frameworks = frameworks_section(groups)) d.sections.push_back(std::move(*frameworks));
  d.sections.push_back(memory_section(groups));
  d.sections.push_back(curves_section(groups));
  Section per{"Per configuration", {}, {}};
  for (const auto& g : groups) per.subsections.push_back(group_section(g));
  d.sections.push_back(std::move(per));
  if (auto projections = projections_section(runs)) d.sections.push_back(std::move(*projections));
  d.sections.push_back(failures_section(runs));
  d.sections.push_back(environment_section(runs));
  return d;
}

nlohmann::json suite_report_json(const std::vector<RunDigest>& runs, const std::string& source) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : group_runs(runs)) {
    nlohmann::json j = {{"workload", g.key.workload},
                        {"framework", g.key.framework},
                        {"preset", g.key.preset},
                        {"device", g.key.device},
                        {"batch", g.key.batch},
                        {"ranks", g.key.ranks},
                        {"unit", g.unit},
                        {"runs", nlohmann::json::array()},
                        {"completed_runs", g.ok.size()}};
    for (const auto* r : g.runs)
      j["runs"].push_back({{"id", r->run.id},
                           {"status", r->status},
                           {"repeat", r->suite_repeat},
                           {"conditions", r->conditions.label()},
                           {"conditions_reasons", r->conditions.reasons}});
    if (!g.throughput.empty()) {
      // `sustained`: the median of the runs' sustained rates (absent where a run stored none);
      // median/p10/p90: of the per-iteration rates pooled over the runs; both in `unit`.
      j["throughput"] = {{"median", median(g.throughput)},     {"p10", quantile(g.throughput, 0.1)},
                         {"p90", quantile(g.throughput, 0.9)}, {"samples", g.throughput.size()},
                         {"job", g.job_throughput()},          {"job_is_median_per_iteration", g.per_iteration()}};
      if (!g.per_iteration()) j["throughput"]["sustained"] = g.rate();
      j["iteration_ms_median"] = median(g.iteration_ms);
    }
    for (const auto& [p, v] : g.phase_ms) j["phases_ms"][p] = v;
    for (const auto& [c, v] : g.class_ms) j["op_classes_ms"][c] = v;
    for (size_t i = 0; i < std::min(kTopOps, g.ops.size()); ++i) {
      j["top_ops"].push_back(
          {{"op", g.ops[i].name},
           {"class", op_class(g.ops[i].name)},
           {"median_ms_per_iteration",
            g.ops[i].median_ms_per_iteration ? nlohmann::json(*g.ops[i].median_ms_per_iteration) : nlohmann::json()},
           {"ms_per_iteration", g.ops[i].total_ms}});
    }
    if (g.first) {
      j["peak_bytes"] = g.first->peak_bytes;
      for (const auto& m : g.first->memory)
        j["memory_at_peak"].push_back({{"category", m.category}, {"tbd_class", m.tbd_class}, {"bytes", m.bytes}});
      for (const auto& b : g.first->breakdown) {
        j["breakdown"].push_back({{"rank", b.rank},
                                  {"iteration_ms", b.iteration_ms},
                                  {"compute_ms", b.compute_ms},
                                  {"comm_ms", b.comm_ms},
                                  {"overlap_ms", b.overlap_ms},
                                  {"exposed_comm_ms", b.exposed_comm_ms},
                                  {"idle_ms", b.idle_ms}});
        for (const auto& f : g.first->interference) {
          if (f.rank == b.rank) j["breakdown"].back()["interference_ms"] = f.interference_ms;
        }
      }
    }
    groups.push_back(j);
  }
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& r : runs) {
    if (!r.finished_ok())
      failed.push_back({{"id", r.run.id},
                        {"status", r.status},
                        {"error", r.run.error},
                        {"timed_iterations_kept", r.iteration_ms.size()}});
  }
  nlohmann::json projections = nlohmann::json::array();
  for (const auto& r : runs) {
    for (const auto& p : r.projections) {
      if (!p.error) continue;
      projections.push_back({{"configuration", r.key.label()},
                             {"measured_run", r.run.id},
                             {"projection_run", p.run_id},
                             {"source_run", p.source_run_id},
                             {"sweep_run", p.sweep_run_id},
                             {"strategy", p.strategy},
                             {"knobs", nlohmann::json::parse(p.knobs_json, nullptr, false)},
                             {"link", p.link},
                             {"projected_ns", p.projected_ns},
                             {"measured_ns", p.measured_ns},
                             {"error", *p.error}});
    }
  }
  return {{"source", source},
          {"runs", runs.size()},
          {"configurations", groups},
          {"not_completed", failed},
          {"projections", projections}};
}

}  // namespace ts::reports
