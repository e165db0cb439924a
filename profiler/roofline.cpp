#include "profiler/roofline.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace ts::profiler {

int64_t Roofline::work_ns() const {
  int64_t total = 0;
  for (size_t c = 0; c < kWorkClassCount; ++c) {
    if (static_cast<WorkClass>(c) != WorkClass::none) total += by_class[c].self_ns;
  }
  return total;
}

namespace {

// Whether [start, end) lies inside one of the sorted, disjoint intervals.
bool covered(const std::vector<Interval>& merged, int64_t start_ns, int64_t end_ns) {
  auto it = std::upper_bound(merged.begin(), merged.end(), start_ns,
                             [](int64_t t, const Interval& i) { return t < i.start_ns; });
  if (it == merged.begin()) return false;
  --it;
  return it->start_ns <= start_ns && end_ns <= it->end_ns;
}

}  // namespace

Roofline roofline(std::span<const Event> events, const NameLookup& lookup, const IterationFilter& counted) {
  Roofline r;
  for (const IterationPhases& p : phase_times(events, lookup)) {
    if (!counted(p.index)) continue;
    ++r.iterations;
    r.total_ns += p.other_ns;   // the loop's time outside any phase
  }

  // The four phases of counted iterations, merged per thread; the data phase's apart.
  std::unordered_map<StringId, int> phase_slot;   // 1: a phase the step is made of, 2: data, 0: other
  std::unordered_map<uint32_t, std::vector<Interval>> phases, data;
  for (const Event& e : events) {
    if (e.kind != EventKind::phase || !counted(e.iteration)) continue;
    auto [it, fresh] = phase_slot.try_emplace(e.name, 0);
    if (fresh) {
      const std::string_view n = lookup(e.name);
      it->second = n == "data" ? 2 : (n == "forward" || n == "backward" || n == "optimizer") ? 1 : 0;
    }
    if (it->second == 0) continue;
    phases[e.thread].push_back({e.start_ns, e.end_ns});
    if (it->second == 2) data[e.thread].push_back({e.start_ns, e.end_ns});
  }
  for (auto& [thread, list] : phases) {
    list = merge(std::move(list));
    for (const Interval& i : list) r.total_ns += i.end_ns - i.start_ns;
  }
  int64_t data_phase_ns = 0;
  for (auto& [thread, list] : data) {
    list = merge(std::move(list));
    for (const Interval& i : list) data_phase_ns += i.end_ns - i.start_ns;
  }

  // Each op in the class it declared, where its outermost op runs inside a phase of its thread.
  const std::vector<OpNode> nodes = op_tree(events);
  int64_t ops_in_data_ns = 0;
  static const std::vector<Interval> kNone;
  const auto on = [](const std::unordered_map<uint32_t, std::vector<Interval>>& m, uint32_t t) -> const std::vector<Interval>& {
    auto it = m.find(t);
    return it == m.end() ? kNone : it->second;
  };
  std::vector<char> inside(nodes.size(), 0);   // per root: inside a phase
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Event& e = events[nodes[i].event];
    if (nodes[i].root == static_cast<std::ptrdiff_t>(i)) {
      inside[i] = covered(on(phases, e.thread), e.start_ns, e.end_ns) ? 1 : 0;
      if (inside[i] && covered(on(data, e.thread), e.start_ns, e.end_ns)) ops_in_data_ns += e.end_ns - e.start_ns;
    }
    if (!inside[static_cast<size_t>(nodes[i].root)]) continue;
    WorkTotals& w = r.by_class[static_cast<size_t>(e.work)];
    w.self_ns += nodes[i].self_ns;
    w.flops += e.flops;
    w.bytes += e.bytes;
    ++w.calls;
  }
  r.data_ns = std::max<int64_t>(0, data_phase_ns - ops_in_data_ns);
  r.overhead_ns = std::max<int64_t>(0, r.total_ns - r.work_ns() - r.data_ns);
  return r;
}

}  // namespace ts::profiler
