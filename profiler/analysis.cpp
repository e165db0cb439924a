#include "profiler/analysis.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "profiler/tracer.h"

namespace ts::profiler {

NameLookup lookup_in(const Tracer& tracer) {
  return [&tracer](StringId id) { return tracer.str(id); };
}

bool all_iterations(int32_t /*iteration*/) { return true; }

namespace {

bool contains(const Event& outer, const Event& inner) {
  return outer.start_ns <= inner.start_ns && inner.end_ns <= outer.end_ns;
}

int64_t duration(const Event& e) { return std::max<int64_t>(0, e.end_ns - e.start_ns); }

// The counted iterations, sorted: those with an `iteration` event, or, where none was recorded,
// those any event is stamped with.
std::vector<int32_t> counted_iterations(std::span<const Event> events, const IterationFilter& counted) {
  std::set<int32_t> marked, stamped;
  for (const Event& e : events) {
    if (e.iteration < 0 || !counted(e.iteration)) continue;
    (e.kind == EventKind::iteration ? marked : stamped).insert(e.iteration);
  }
  const std::set<int32_t>& use = marked.empty() ? stamped : marked;
  return {use.begin(), use.end()};
}

}  // namespace

std::vector<OpNode> op_tree(std::span<const Event> events) {
  std::vector<size_t> ops;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == EventKind::op) ops.push_back(i);
  }
  std::sort(ops.begin(), ops.end(), [&](size_t a, size_t b) {
    const Event& x = events[a];
    const Event& y = events[b];
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.end_ns != y.end_ns) return x.end_ns > y.end_ns;
    return a < b;
  });
  std::vector<OpNode> nodes;
  nodes.reserve(ops.size());
  std::vector<size_t> open;  // stack of node indices
  for (size_t idx : ops) {
    const Event& e = events[idx];
    if (!open.empty() && events[nodes[open.back()].event].thread != e.thread) open.clear();
    // Pops what ended before e starts, and (for hand-made traces) what only partly overlaps it.
    while (!open.empty() && !contains(events[nodes[open.back()].event], e)) open.pop_back();
    OpNode n{idx, -1, static_cast<std::ptrdiff_t>(nodes.size()), duration(e)};
    if (!open.empty()) {
      n.parent = static_cast<std::ptrdiff_t>(open.back());
      n.root = nodes[open.back()].root;
      nodes[open.back()].self_ns -= n.self_ns;
    }
    nodes.push_back(n);
    open.push_back(nodes.size() - 1);
  }
  for (OpNode& n : nodes) n.self_ns = std::max<int64_t>(0, n.self_ns);
  return nodes;
}

std::vector<IterationPhases> phase_times(std::span<const Event> events, const NameLookup& lookup) {
  enum Slot { data, forward, backward, optimizer, unknown };
  std::unordered_map<StringId, Slot> slots;
  auto slot_of = [&](StringId id) {
    auto [it, fresh] = slots.try_emplace(id, unknown);
    if (fresh) {
      const std::string_view n = lookup(id);
      it->second = n == "data"        ? data
                   : n == "forward"   ? forward
                   : n == "backward"  ? backward
                   : n == "optimizer" ? optimizer
                                      : unknown;
    }
    return it->second;
  };

  std::map<int32_t, IterationPhases> iterations;
  for (const Event& e : events) {
    if (e.kind != EventKind::iteration) continue;
    auto [it, fresh] = iterations.try_emplace(e.iteration);
    IterationPhases& p = it->second;
    if (fresh) {
      p.index = e.iteration;
      p.start_ns = e.start_ns;
      p.end_ns = e.end_ns;
    } else {
      p.start_ns = std::min(p.start_ns, e.start_ns);
      p.end_ns = std::max(p.end_ns, e.end_ns);
    }
  }
  std::map<int32_t, std::vector<Interval>> phase_intervals;
  const auto add = [&](const Event& e, int64_t d) {
    auto it = iterations.find(e.iteration);
    if (it == iterations.end()) return;
    IterationPhases& p = it->second;
    switch (slot_of(e.name)) {
      case data: p.data_ns += d; break;
      case forward: p.forward_ns += d; break;
      case backward: p.backward_ns += d; break;
      case optimizer: p.optimizer_ns += d; break;
      case unknown: break;
    }
  };
  // Per thread, in trace order (an enclosing phase before what it holds): each phase adds its
  // time and takes it off the phase it is directly nested in.
  std::vector<const Event*> phases;
  for (const Event& e : events) {
    if (e.kind == EventKind::phase) phases.push_back(&e);
  }
  std::stable_sort(phases.begin(), phases.end(), [](const Event* a, const Event* b) {
    return a->thread != b->thread ? a->thread < b->thread : trace_order(*a, *b);
  });
  std::vector<const Event*> open;
  for (size_t i = 0; i < phases.size(); ++i) {
    const Event& e = *phases[i];
    if (i > 0 && phases[i - 1]->thread != e.thread) open.clear();
    while (!open.empty() && open.back()->end_ns <= e.start_ns) open.pop_back();
    const int64_t d = duration(e);
    add(e, d);
    if (!open.empty() && e.end_ns <= open.back()->end_ns) add(*open.back(), -d);
    open.push_back(&e);
    if (iterations.count(e.iteration) && slot_of(e.name) != unknown) {
      phase_intervals[e.iteration].push_back({e.start_ns, e.end_ns});
    }
  }
  std::vector<IterationPhases> out;
  out.reserve(iterations.size());
  for (auto& [index, p] : iterations) {
    const auto& intervals = phase_intervals[index];
    p.other_ns = std::max<int64_t>(0, p.span_ns() - union_length(clip(intervals, p.start_ns, p.end_ns)));
    out.push_back(p);
  }
  return out;
}

std::vector<IterationPhases> phase_times(std::span<const Event> events, const Tracer& tracer) {
  return phase_times(events, lookup_in(tracer));
}

std::vector<LayerTime> layer_times(std::span<const Event> events, const NameLookup& lookup,
                                   const IterationFilter& counted) {
  struct Acc {
    LayerTime t;
    int64_t first_start;
    std::set<StringId> ops;
  };
  std::unordered_map<StringId, Acc> layers;
  std::unordered_map<StringId, std::map<int32_t, int64_t>> per_iteration;  // forward + backward
  const std::vector<int32_t> iterations = counted_iterations(events, counted);
  for (const OpNode& n : op_tree(events)) {
    const Event& e = events[n.event];
    if (n.parent >= 0 || e.layer == 0 || !counted(e.iteration)) continue;
    if (e.pass == Pass::forward || e.pass == Pass::backward) per_iteration[e.layer][e.iteration] += duration(e);
    auto [it, fresh] = layers.try_emplace(e.layer);
    Acc& a = it->second;
    if (fresh) {
      a.t.layer = e.layer;
      a.first_start = e.start_ns;
    }
    a.first_start = std::min(a.first_start, e.start_ns);
    const int64_t d = duration(e);
    (e.pass == Pass::forward ? a.t.forward_ns : e.pass == Pass::backward ? a.t.backward_ns : a.t.other_ns) += d;
    ++a.t.calls;
    a.ops.insert(e.name);
  }
  std::vector<Acc*> order;
  order.reserve(layers.size());
  for (auto& [id, a] : layers) order.push_back(&a);
  std::sort(order.begin(), order.end(), [](const Acc* x, const Acc* y) {
    return x->first_start != y->first_start ? x->first_start < y->first_start : x->t.layer < y->t.layer;
  });
  std::vector<LayerTime> out;
  out.reserve(order.size());
  for (Acc* a : order) {
    a->t.name = std::string(lookup(a->t.layer));
    for (StringId op : a->ops) a->t.ops.emplace_back(lookup(op));
    std::sort(a->t.ops.begin(), a->t.ops.end());
    a->t.ops.erase(std::unique(a->t.ops.begin(), a->t.ops.end()), a->t.ops.end());
    a->t.median_per_iteration_ns = median_over_iterations(per_iteration[a->t.layer], iterations);
    a->t.per_iteration_ns = values_over_iterations(per_iteration[a->t.layer], iterations);
    out.push_back(std::move(a->t));
  }
  return out;
}

std::vector<OpStat> op_summary(std::span<const Event> events, const NameLookup& lookup,
                               const IterationFilter& counted) {
  std::unordered_map<StringId, std::vector<int64_t>> by_name;
  std::unordered_map<std::string, int64_t> inclusive;
  std::unordered_map<std::string, std::map<int32_t, int64_t>> per_iteration;
  const std::vector<int32_t> iterations = counted_iterations(events, counted);
  for (const OpNode& n : op_tree(events)) {
    const Event& e = events[n.event];
    if (!counted(e.iteration)) continue;
    by_name[e.name].push_back(n.self_ns);
    const std::string name(lookup(e.name));
    inclusive[name] += duration(e);
    per_iteration[name][e.iteration] += n.self_ns;
  }
  auto stats = duration_stats(std::move(by_name), lookup);
  for (OpStat& s : stats) {
    s.inclusive_ns = inclusive[s.name];
    s.median_per_iteration_ns = median_over_iterations(per_iteration[s.name], iterations);
    s.per_iteration_ns = values_over_iterations(per_iteration[s.name], iterations);
  }
  return stats;
}

std::vector<int64_t> values_over_iterations(const std::map<int32_t, int64_t>& per_iteration,
                                            const std::vector<int32_t>& iterations) {
  std::vector<int64_t> v;
  v.reserve(iterations.size());
  for (const int32_t i : iterations) {
    const auto at = per_iteration.find(i);
    v.push_back(at == per_iteration.end() ? 0 : at->second);
  }
  return v;
}

int64_t median_over_iterations(const std::map<int32_t, int64_t>& per_iteration,
                               const std::vector<int32_t>& iterations) {
  if (iterations.empty()) return 0;
  std::vector<int64_t> v = values_over_iterations(per_iteration, iterations);
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const int64_t upper = v[mid];
  const int64_t lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

std::vector<OpStat> duration_stats(std::unordered_map<StringId, std::vector<int64_t>> by_name,
                                   const NameLookup& lookup) {
  std::vector<OpStat> out;
  out.reserve(by_name.size());
  for (auto& [name, times] : by_name) {
    if (times.empty()) continue;
    std::sort(times.begin(), times.end());
    OpStat s;
    s.name = std::string(lookup(name));
    s.count = static_cast<int64_t>(times.size());
    for (int64_t t : times) s.total_ns += t;
    s.inclusive_ns = s.total_ns;  // durations without nesting; op_summary sets its own
    s.mean_ns = static_cast<double>(s.total_ns) / static_cast<double>(s.count);
    const size_t mid = times.size() / 2;
    s.median_ns = times.size() % 2 == 1 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
    s.min_ns = times.front();
    s.max_ns = times.back();
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const OpStat& a, const OpStat& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

std::vector<Interval> merge(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& i) { return i.end_ns <= i.start_ns; });
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.start_ns <= out.back().end_ns) {
      out.back().end_ns = std::max(out.back().end_ns, i.end_ns);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

int64_t union_length(std::vector<Interval> intervals) {
  int64_t total = 0;
  for (const Interval& i : merge(std::move(intervals))) total += i.end_ns - i.start_ns;
  return total;
}

int64_t intersection_length(std::vector<Interval> a, std::vector<Interval> b) {
  const std::vector<Interval> x = merge(std::move(a));
  const std::vector<Interval> y = merge(std::move(b));
  int64_t total = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < x.size() && j < y.size()) {
    const int64_t lo = std::max(x[i].start_ns, y[j].start_ns);
    const int64_t hi = std::min(x[i].end_ns, y[j].end_ns);
    if (hi > lo) total += hi - lo;
    (x[i].end_ns < y[j].end_ns) ? ++i : ++j;
  }
  return total;
}

std::vector<Interval> clip(std::span<const Interval> intervals, int64_t start_ns, int64_t end_ns) {
  std::vector<Interval> out;
  out.reserve(intervals.size());
  for (const Interval& i : intervals) {
    const Interval c{std::max(i.start_ns, start_ns), std::min(i.end_ns, end_ns)};
    if (c.end_ns > c.start_ns) out.push_back(c);
  }
  return out;
}

Breakdown breakdown(std::span<const Interval> compute, std::span<const Interval> comm, int64_t span_start_ns,
                    int64_t span_end_ns) {
  Breakdown b;
  b.span_ns = std::max<int64_t>(0, span_end_ns - span_start_ns);
  const std::vector<Interval> cu = merge(clip(compute, span_start_ns, span_end_ns));
  const std::vector<Interval> co = merge(clip(comm, span_start_ns, span_end_ns));
  b.compute_ns = union_length(cu);
  b.comm_ns = union_length(co);
  b.overlap_ns = intersection_length(cu, co);
  b.exposed_comm_ns = b.comm_ns - b.overlap_ns;
  b.overlap_fraction = b.comm_ns > 0 ? static_cast<double>(b.overlap_ns) / static_cast<double>(b.comm_ns) : 0.0;
  // |A u B| = |A| + |B| - |A n B|
  b.idle_ns = b.span_ns - (b.compute_ns + b.comm_ns - b.overlap_ns);
  return b;
}

std::vector<Interval> subtract(std::vector<Interval> a, std::vector<Interval> b) {
  const std::vector<Interval> keep = merge(std::move(a));
  const std::vector<Interval> cut = merge(std::move(b));
  std::vector<Interval> out;
  size_t j = 0;
  for (Interval i : keep) {
    while (j < cut.size() && cut[j].end_ns <= i.start_ns) ++j;
    int64_t from = i.start_ns;
    for (size_t k = j; k < cut.size() && cut[k].start_ns < i.end_ns; ++k) {
      if (cut[k].start_ns > from) out.push_back({from, cut[k].start_ns});
      from = std::max(from, cut[k].end_ns);
    }
    if (from < i.end_ns) out.push_back({from, i.end_ns});
  }
  return out;
}

std::vector<IterationCommBreakdown> comm_breakdown(std::span<const Event> events) {
  struct Parts {
    bool seen = false;
    int64_t start = 0, end = 0;
    std::vector<Interval> phases, comm, wait;
    std::map<StringId, std::vector<Interval>> wait_by_name;
  };
  std::map<int32_t, Parts> by_iteration;
  for (const Event& e : events) {
    if (e.iteration < 0) continue;
    Parts& p = by_iteration[e.iteration];
    switch (e.kind) {
      case EventKind::iteration:
        p.seen = true;
        p.start = e.start_ns;
        p.end = e.end_ns;
        break;
      case EventKind::phase: p.phases.push_back({e.start_ns, e.end_ns}); break;
      case EventKind::comm: p.comm.push_back({e.start_ns, e.end_ns}); break;
      case EventKind::wait:
        p.wait.push_back({e.start_ns, e.end_ns});
        p.wait_by_name[e.name].push_back({e.start_ns, e.end_ns});
        break;
      default: break;
    }
  }
  std::vector<IterationCommBreakdown> out;
  for (auto& [index, p] : by_iteration) {
    if (!p.seen) continue;
    IterationCommBreakdown b;
    b.iteration = index;
    b.start_ns = p.start;
    b.end_ns = p.end;
    const auto compute = clip(subtract(p.phases, p.wait), p.start, p.end);
    const auto comm = clip(p.comm, p.start, p.end);
    b.time = breakdown(compute, comm, p.start, p.end);
    b.wait_ns = union_length(clip(p.wait, p.start, p.end));
    for (const auto& [name, waits] : p.wait_by_name) b.wait_by_name[name] = union_length(clip(waits, p.start, p.end));
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace ts::profiler
