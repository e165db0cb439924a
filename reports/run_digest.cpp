#include "reports/run_digest.h"

#include <algorithm>
#include <charconv>
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

// Per timed iteration: each phase's time summed (a3c's learners add up), the loop's four phases
// first, then a workload's own; an iteration without a phase counts 0 for it.
std::vector<PhaseSamples> phase_samples(store::Reader& reader, int64_t run, const std::vector<int64_t>& timed) {
  std::map<int64_t, size_t> slot;
  for (size_t i = 0; i < timed.size(); ++i) slot[timed[i]] = i;
  std::map<std::string, std::vector<double>> by_phase;
  for (const auto& p : reader.phases(run)) {
    const auto at = slot.find(p.iteration);
    if (at == slot.end()) continue;
    auto& v = by_phase[p.phase];
    v.resize(timed.size(), 0.0);
    v[at->second] += ms(p.end_ns - p.start_ns);
  }
  std::vector<PhaseSamples> out;
  for (const char* name : {"data", "forward", "backward", "optimizer"}) {
    if (const auto it = by_phase.find(name); it != by_phase.end()) {
      out.push_back({it->first, std::move(it->second)});
      by_phase.erase(it);
    }
  }
  for (auto& [name, v] : by_phase) out.push_back({name, std::move(v)});
  return out;
}

}  // namespace

std::string RunKey::label() const {
  std::string s = fmt::format("{}/{} {} batch {}", workload, preset, device, batch);
  if (ranks > 1) s += fmt::format(" x{} ranks", ranks);
  return s;
}

RunDigest digest_run(store::Reader& reader, const std::filesystem::path& db, const store::RunRow& run,
                     const MemoryClassifier& classify) {
  RunDigest d;
  d.db = db;
  d.run = run;
  d.key = {run.workload, run.preset, run.device, run.batch_size, std::max<int64_t>(run.ranks, 1)};
  d.status = store::status_label(run);
  if (const auto cfg = nlohmann::json::parse(run.config_json, nullptr, false); cfg.is_object() && cfg.contains("suite")) {
    const auto& tag = cfg["suite"];
    d.suite = tag.value("name", "");
    d.suite_entry = tag.value("entry", int64_t{0});
    d.suite_repeat = tag.value("repeat", int64_t{0});
  }
  for (const auto& m : reader.metrics(run.id)) {
    if (m.iteration >= 0) continue;
    d.metrics[m.name] = m.value;
    if (m.name == "throughput_median" && !m.unit.empty()) d.unit = m.unit;
  }

  std::vector<int64_t> timed;
  for (const auto& it : reader.iterations(run.id)) {
    if (it.warmup) continue;
    const double wall = ms(it.end_ns - it.start_ns);
    if (wall <= 0) continue;   // a clock step: no rate can be made of it
    timed.push_back(it.index);
    d.iteration_ms.push_back(wall);
    d.throughput.push_back(static_cast<double>(it.samples) / (wall * 1e-3));
  }
  d.phases = phase_samples(reader, run.id, timed);

  if (d.key.ranks > 1) {
    std::map<int64_t, double> exposed;   // iteration -> the largest over ranks
    std::map<int64_t, std::vector<store::RankBreakdownRow>> per_rank;
    const std::set<int64_t> timed_set(timed.begin(), timed.end());
    for (auto& b : reader.rank_breakdown(run.id)) {
      if (!timed_set.contains(b.iteration)) continue;
      exposed[b.iteration] = std::max(exposed[b.iteration], ms(b.exposed_comm_ns));
      per_rank[b.rank].push_back(b);
    }
    for (const auto& [_, v] : exposed) d.exposed_comm_ms.push_back(v);
    for (const auto& [rank, rows] : per_rank) {
      std::vector<double> it, compute, comm, overlap, exp, idle;
      for (const auto& b : rows) {
        it.push_back(ms(b.end_ns - b.start_ns));
        compute.push_back(ms(b.compute_ns));
        comm.push_back(ms(b.comm_ns));
        overlap.push_back(ms(b.overlap_ns));
        exp.push_back(ms(b.exposed_comm_ns));
        idle.push_back(ms(b.idle_ns));
      }
      d.breakdown.push_back({rank, median(it), median(compute), median(comm), median(overlap), median(exp), median(idle)});
    }
  }

  for (const auto& o : reader.op_summary(run.id)) {
    if (o.device == "cpu") d.ops.push_back({o.name, o.count, ms(o.total_ns)});
  }
  std::stable_sort(d.ops.begin(), d.ops.end(), [](const OpTotal& a, const OpTotal& b) { return a.total_ms > b.total_ms; });
  for (const auto& l : reader.layers(run.id)) {
    d.layers.push_back({l.layer, l.forward_ns * 1e-6, l.backward_ns * 1e-6, l.activation_bytes, l.parameter_count});
  }
  for (const auto& p : reader.memory_peak(run.id)) {
    d.peak_bytes += p.bytes;
    if (p.bytes != 0) d.memory.push_back({p.category, classify ? classify(p.category) : std::string(), p.bytes});
  }
  d.environment = reader.environment(run.id);
  return d;
}

std::vector<RunDigest> select_runs(const std::filesystem::path& db, const std::vector<std::string>& selectors,
                                   const MemoryClassifier& classify) {
  store::Reader reader(db);
  const auto runs = reader.runs();
  std::map<int64_t, std::string> suite_of;   // run id -> the suite that made it ("" when none)
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
          one || (lo && hi) ? fmt::format("{}: no training run {} in {}", sel, sel, db.string())
                            : fmt::format("{}: neither a run id, a range A-B, nor a suite with runs in {}", sel, db.string()));
    }
  }
  std::vector<RunDigest> out;
  for (const auto& r : runs) {
    if (r.workload == "collectives") continue;
    if (selectors.empty() || chosen.contains(r.id)) out.push_back(digest_run(reader, db, r, classify));
  }
  return out;
}

}  // namespace ts::reports
