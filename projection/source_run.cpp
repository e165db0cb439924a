#include "projection/source_run.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vocabulary/rates.h"

namespace ts::projection {

int64_t SourceGroup::total_bytes() const {
  int64_t n = 0;
  for (int64_t b : bytes) n += b;
  return n;
}

namespace {

[[noreturn]] void refuse(int64_t run, const std::string& why) {
  throw std::invalid_argument(fmt::format("run {} cannot be projected: {}", run, why));
}

}  // namespace

int SourceRun::parameter_count() const {
  int n = 0;
  for (const auto& g : groups) n += static_cast<int>(g.names.size());
  return n;
}

namespace {

// A parameter's layer: its path without the last component ("layer1.0.conv1.weight" -> "layer1.0.conv1").
std::string layer_of(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? std::string() : parameter.substr(0, dot);
}

// Each forward's first op per layer, as (flat index, offset) for the parameters of that layer.
void add_forward_uses(store::Reader& reader, SourceRun& s, const std::map<int64_t, int64_t>& iteration_start) {
  std::unordered_map<std::string, std::vector<int>> params_of_layer;
  for (size_t g = 0; g < s.groups.size(); ++g) {
    for (size_t i = 0; i < s.groups[g].names.size(); ++i)
      params_of_layer[layer_of(s.groups[g].names[i])].push_back(s.flat(static_cast<int>(g), static_cast<int>(i)));
  }
  const auto forward_id = reader.string_id("forward");
  if (!forward_id) return;
  const auto ops = reader.event_ids(s.run.id, 0, {"op"});
  std::vector<int64_t> layer_ids;
  for (const auto& e : ops) layer_ids.push_back(e.layer);
  std::sort(layer_ids.begin(), layer_ids.end());
  layer_ids.erase(std::unique(layer_ids.begin(), layer_ids.end()), layer_ids.end());
  const auto names = reader.strings(layer_ids);
  std::unordered_map<int64_t, const std::vector<int>*> params_of_id;
  for (const auto& [id, name] : names) {
    const auto it = params_of_layer.find(name);
    if (it != params_of_layer.end()) params_of_id[id] = &it->second;
  }
  std::map<int64_t, SourceIteration*> by_index;
  for (auto& it : s.iterations) by_index[it.index] = &it;
  for (const auto& e : ops) {  // by start
    if (e.pass != *forward_id) continue;
    const auto params = params_of_id.find(e.layer);
    const auto it = by_index.find(e.iteration);
    const auto start = iteration_start.find(e.iteration);
    if (params == params_of_id.end() || it == by_index.end() || start == iteration_start.end()) continue;
    const int64_t t = e.start_ns - start->second;
    for (auto& p : it->second->phases) {
      if (p.name != "forward" || t < p.start_ns || t > p.end_ns) continue;
      for (int flat : *params->second) {
        const bool seen =
            std::any_of(p.first_use.begin(), p.first_use.end(), [&](const auto& u) { return u.first == flat; });
        if (!seen) p.first_use.emplace_back(flat, t - p.start_ns);
      }
      break;
    }
  }
}

// An actor-learner run's timed iterations as its learners' updates: each learner thread's phases
// from an acting phase to the end of the optimizer phase after it; its *_step ops there, the step.
void read_learner_updates(store::Reader& reader, SourceRun& s) {
  const auto events = reader.event_ids(s.run.id, 0, {"phase", "op"});
  const auto phase_kind = reader.string_id("phase");
  std::vector<int64_t> ids;
  for (const auto& e : events) ids.push_back(e.name);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const auto names = reader.strings(ids);
  const auto name_of = [&](int64_t id) {
    const auto n = names.find(id);
    return n == names.end() ? std::string() : n->second;
  };
  std::map<int64_t, int> learner_of;                        // thread -> learner
  std::map<int64_t, std::vector<SourceUpdate>> updates_of;  // by iteration
  // The update an event of a learner's thread falls in: that learner's last begun before it.
  const auto update_of = [&](const store::EventIdRow& e) -> SourceUpdate* {
    const auto l = learner_of.find(e.thread);
    if (l == learner_of.end()) return nullptr;
    auto& list = updates_of[e.iteration];
    for (auto u = list.rbegin(); u != list.rend(); ++u) {
      if (u->learner == l->second && u->start_ns <= e.start_ns) return &*u;
    }
    return nullptr;
  };
  for (const auto& e : events) {  // by start
    const std::string name = name_of(e.name);
    const bool phase = phase_kind && e.kind == *phase_kind;
    if (phase && name == "acting") {
      const int learner = learner_of.emplace(e.thread, static_cast<int>(learner_of.size())).first->second;
      updates_of[e.iteration].push_back({learner, e.start_ns, e.end_ns, 0});
    } else if (phase && (name == "forward" || name == "backward" || name == "optimizer")) {
      if (SourceUpdate* u = update_of(e)) u->end_ns = std::max(u->end_ns, e.end_ns);
    } else if (!phase && name.ends_with("_step")) {
      if (SourceUpdate* u = update_of(e)) u->step_ns += e.end_ns - e.start_ns;
    }
  }
  s.learners = static_cast<int>(learner_of.size());
  for (const auto& it : reader.iterations(s.run.id)) {
    if (it.warmup) continue;
    SourceIteration si;
    si.index = it.index;
    si.span_ns = it.end_ns - it.start_ns;
    si.samples = it.samples;
    for (SourceUpdate u : updates_of[it.index]) {
      u.start_ns -= it.start_ns;
      u.end_ns -= it.start_ns;
      if (u.start_ns >= 0 && u.end_ns <= si.span_ns) si.updates.push_back(u);
    }
    std::stable_sort(si.updates.begin(), si.updates.end(),
                     [](const SourceUpdate& a, const SourceUpdate& b) { return a.start_ns < b.start_ns; });
    if (si.updates.empty()) refuse(s.run.id, fmt::format("its iteration {} holds no learner's update", it.index));
    s.iterations.push_back(std::move(si));
  }
  if (s.iterations.empty()) refuse(s.run.id, "it has no timed iterations");
}

// The run-level figures: the memory-bound ops' rate, the groups' clipping, each iteration's tokens.
void read_run_metrics(store::Reader& reader, SourceRun& s) {
  double bytes = 0, ns = 0;
  std::map<int64_t, SourceIteration*> by_index;
  for (auto& it : s.iterations) by_index[it.index] = &it;
  for (const auto& m : reader.metrics(s.run.id)) {
    if (m.name == "tokens" && m.iteration >= 0) {
      if (const auto it = by_index.find(m.iteration); it != by_index.end())
        it->second->tokens = static_cast<int64_t>(m.value);
    }
    if (m.iteration != -1) continue;
    if (m.name == "roofline_memory_bytes") bytes = m.value;
    if (m.name == "roofline_memory_ns") ns = m.value;
    if (m.name.starts_with("gradient_clip_norm.") && m.value > 0) {
      const size_t g = std::stoul(m.name.substr(std::string_view("gradient_clip_norm.").size()));
      if (g < s.groups.size()) s.groups[g].clipped = true;
    }
  }
  s.memory_gbps = ns > 0 ? bytes / ns : 0;
}

}  // namespace

SourceRun read_source(store::Reader& reader, int64_t run_id, bool with_forward_uses) {
  SourceRun s;
  const auto run = reader.run(run_id);
  if (!run) throw std::invalid_argument(fmt::format("no run {} in the db", run_id));
  s.run = *run;
  if (run->framework != "trainscope") refuse(run_id, "it was imported from " + run->framework + ", not trained here");
  if (run->workload == "collectives") refuse(run_id, "it is a collectives benchmark, not a training run");
  if (run->ranks != 1) refuse(run_id, fmt::format("it ran {} ranks; a projection starts from one", run->ranks));
  if (run->status != store::RunStatus::completed) refuse(run_id, "it did not complete");
  if (!run->trace) refuse(run_id, "it was run without its trace (--no-trace)");
  try {
    const auto cfg = nlohmann::json::parse(run->config_json);
    const std::string shard = cfg.value("shard", std::string());
    if (const auto slash = shard.find('/'); slash != std::string::npos) {
      s.shard_rank = std::stoi(shard.substr(0, slash));
      s.shard_ranks = std::stoi(shard.substr(slash + 1));
    }
  } catch (const std::exception&) {  // no readable config: the whole data set, as before --shard
  }

  for (const auto& g : reader.gradients(run_id)) {
    if (g.group < 0 || g.slot < 0) refuse(run_id, "its gradients table holds a negative group or slot");
    if (static_cast<size_t>(g.group) >= s.groups.size()) s.groups.resize(static_cast<size_t>(g.group) + 1);
    auto& grp = s.groups[static_cast<size_t>(g.group)];
    if (static_cast<size_t>(g.slot) != grp.names.size()) refuse(run_id, "its gradients are not stored slot by slot");
    grp.names.push_back(g.name);
    grp.bytes.push_back(g.bytes);
  }
  if (s.groups.empty()) {
    refuse(run_id, "it recorded no gradients (runs stored before schema v15 did not; run it again with this build)");
  }
  int offset = 0;
  for (const auto& g : s.groups) {
    s.group_offset.push_back(offset);
    offset += static_cast<int>(g.names.size());
  }

  for (const auto& m : reader.metrics(run_id)) {
    if (m.name == "learners" && m.iteration == -1 && m.value > 0) {
      read_learner_updates(reader, s);
      read_run_metrics(reader, s);
      return s;
    }
  }

  // The gradients' markers: their iteration, time and parameter.
  const auto ready_id = reader.string_id("gradient ready");
  const std::string no_markers =
      "its trace holds no gradient-ready markers (runs before schema v15 recorded none: run it again)";
  if (!ready_id) refuse(run_id, no_markers);
  struct Marker {
    int64_t iteration, t;
    int64_t layer;
  };
  std::vector<Marker> markers;
  std::vector<int64_t> layer_ids;
  for (const auto& e : reader.event_ids(run_id, 0, {"marker"})) {
    if (e.name != *ready_id) continue;
    markers.push_back({e.iteration, e.start_ns, e.layer});
    layer_ids.push_back(e.layer);
  }
  if (markers.empty()) refuse(run_id, no_markers);
  std::sort(layer_ids.begin(), layer_ids.end());
  layer_ids.erase(std::unique(layer_ids.begin(), layer_ids.end()), layer_ids.end());
  const auto names = reader.strings(layer_ids);
  // A parameter's name -> (group, slot); a name in two groups is the first's.
  std::unordered_map<std::string, std::pair<int, int>> slot_of;
  for (size_t g = 0; g < s.groups.size(); ++g) {
    for (size_t i = 0; i < s.groups[g].names.size(); ++i)
      slot_of.emplace(s.groups[g].names[i], std::pair{static_cast<int>(g), static_cast<int>(i)});
  }

  // Phases by iteration (rank 0: the only one).
  std::map<int64_t, std::vector<store::PhaseRow>> phases_of;
  for (auto& p : reader.phases(run_id)) phases_of[p.iteration].push_back(std::move(p));
  std::map<int64_t, std::vector<Marker>> markers_of;
  for (const auto& m : markers) markers_of[m.iteration].push_back(m);

  std::vector<bool> arrival_seen(s.groups.size(), false);
  std::map<int64_t, int64_t> iteration_start;
  for (const auto& it : reader.iterations(run_id)) {
    iteration_start[it.index] = it.start_ns;
    auto& phases = phases_of[it.index];
    std::sort(phases.begin(), phases.end(),
              [](const store::PhaseRow& a, const store::PhaseRow& b) { return a.start_ns < b.start_ns; });
    SourceIteration si;
    si.index = it.index;
    si.span_ns = it.end_ns - it.start_ns;
    si.samples = it.samples;
    for (const auto& p : phases) {
      if (p.start_ns < it.start_ns || p.end_ns > it.end_ns) continue;
      // Nested phases (none in a one-rank run) would count twice: only the outermost are kept.
      if (!si.phases.empty() && p.start_ns < si.phases.back().end_ns + it.start_ns) continue;
      si.phases.push_back({p.phase, p.start_ns - it.start_ns, p.end_ns - it.start_ns, -1, {}});
    }
    auto& ms = markers_of[it.index];
    std::stable_sort(ms.begin(), ms.end(), [](const Marker& a, const Marker& b) { return a.t < b.t; });
    for (const auto& m : ms) {
      const auto name = names.find(m.layer);
      if (name == names.end()) continue;
      const auto slot = slot_of.find(name->second);
      if (slot == slot_of.end()) continue;
      const int64_t t = m.t - it.start_ns;
      for (auto& p : si.phases) {
        if (p.name != "backward" || t < p.start_ns || t > p.end_ns) continue;
        if (p.group < 0) p.group = slot->second.first;
        if (p.group != slot->second.first) break;
        const bool seen =
            std::any_of(p.ready.begin(), p.ready.end(), [&](const auto& r) { return r.first == slot->second.second; });
        if (!seen) p.ready.emplace_back(slot->second.second, t - p.start_ns);
        break;
      }
    }
    for (const auto& p : si.phases) {
      if (p.name != "backward" || p.group < 0 || arrival_seen[static_cast<size_t>(p.group)]) continue;
      arrival_seen[static_cast<size_t>(p.group)] = true;
      auto& grp = s.groups[static_cast<size_t>(p.group)];
      std::vector<bool> in(grp.names.size(), false);
      for (const auto& [slot, _] : p.ready) {
        grp.arrival.push_back(slot);
        in[static_cast<size_t>(slot)] = true;
      }
      for (size_t k = grp.names.size(); k-- > 0;) {
        if (!in[k]) grp.arrival.push_back(static_cast<int>(k));
      }
    }
    if (!it.warmup) s.iterations.push_back(std::move(si));
  }
  if (s.iterations.empty()) refuse(run_id, "it has no timed iterations");
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (s.groups[g].arrival.empty()) {
      for (size_t k = s.groups[g].names.size(); k-- > 0;) s.groups[g].arrival.push_back(static_cast<int>(k));
    }
  }
  if (with_forward_uses) add_forward_uses(reader, s, iteration_start);
  read_run_metrics(reader, s);
  return s;
}

double median_span_ns(const SourceRun& source) {
  std::vector<double> spans;
  for (const auto& it : source.iterations) spans.push_back(static_cast<double>(it.span_ns));
  return vocabulary::percentile(spans, 0.5);
}

}  // namespace ts::projection
