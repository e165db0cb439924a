#include "profiler/roofline.h"

#include <algorithm>
#include <map>
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
  // Counted iterations' spans, and every phase of theirs (the loop's four and a workload's own,
  // as a3c's acting), per thread and per iteration; the data phases apart.
  std::map<int32_t, Interval> spans;
  for (const Event& e : events) {
    if (e.kind != EventKind::iteration || !counted(e.iteration)) continue;
    auto [it, fresh] = spans.try_emplace(e.iteration, Interval{e.start_ns, e.end_ns});
    if (!fresh) it->second = {std::min(it->second.start_ns, e.start_ns), std::max(it->second.end_ns, e.end_ns)};
  }
  std::unordered_map<StringId, bool> is_data;
  std::unordered_map<uint32_t, std::vector<Interval>> phases, data;
  std::map<int32_t, std::vector<Interval>> phases_of;
  for (const Event& e : events) {
    if (e.kind != EventKind::phase || !spans.contains(e.iteration)) continue;
    auto [it, fresh] = is_data.try_emplace(e.name, false);
    if (fresh) it->second = lookup(e.name) == "data";
    phases[e.thread].push_back({e.start_ns, e.end_ns});
    phases_of[e.iteration].push_back({e.start_ns, e.end_ns});
    if (it->second) data[e.thread].push_back({e.start_ns, e.end_ns});
  }
  for (const auto& [i, span] : spans) {  // the loop's time outside any phase
    ++r.iterations;
    r.total_ns += span.end_ns - span.start_ns - union_length(clip(phases_of[i], span.start_ns, span.end_ns));
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
  const auto on = [](const std::unordered_map<uint32_t, std::vector<Interval>>& m,
                     uint32_t t) -> const std::vector<Interval>& {
    auto it = m.find(t);
    return it == m.end() ? kNone : it->second;
  };
  std::vector<char> inside(nodes.size(), 0);  // per root: inside a phase
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
