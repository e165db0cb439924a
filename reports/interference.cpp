#include "reports/interference.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace ts::reports {

std::optional<double> RankInterference::covered_share() const {
  if (disturbed_ns <= 0) return std::nullopt;
  return static_cast<double>(covered_ns) / static_cast<double>(disturbed_ns);
}

namespace {

struct Span {
  int64_t start = 0, end = 0;
};

// Sorted, disjoint intervals with the running sum of their lengths: the time they cover before
// any point in O(log n), so an op's time under them is covered(end) - covered(start).
class Coverage {
 public:
  explicit Coverage(std::vector<Span> spans) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    for (const Span& s : spans) {
      if (s.end <= s.start) continue;
      if (!merged_.empty() && s.start <= merged_.back().end) {
        merged_.back().end = std::max(merged_.back().end, s.end);
      } else {
        merged_.push_back(s);
      }
    }
    before_.reserve(merged_.size());
    int64_t sum = 0;
    for (const Span& s : merged_) {
      before_.push_back(sum);
      sum += s.end - s.start;
    }
  }
  // |U spans n [start, end)|.
  int64_t within(int64_t start, int64_t end) const { return end <= start ? 0 : covered(end) - covered(start); }

 private:
  // |U spans n (-inf, t)|.
  int64_t covered(int64_t t) const {
    // The last interval starting before t.
    auto it = std::lower_bound(merged_.begin(), merged_.end(), t, [](const Span& s, int64_t v) { return s.start < v; });
    if (it == merged_.begin()) return 0;
    const size_t k = static_cast<size_t>(it - merged_.begin()) - 1;
    return before_[k] + std::min(t, merged_[k].end) - merged_[k].start;
  }
  std::vector<Span> merged_;
  std::vector<int64_t> before_;
};

// The median of whole numbers; the even case: the mean of the two middle ones, rounded down (as
// the op summary's medians).
int64_t median_of(std::vector<int64_t> v) {
  const size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const int64_t upper = v[mid];
  if (n % 2 == 1) return upper;
  const int64_t lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return lower + (upper - lower) / 2;
}

struct Instance {
  int64_t self = 0, under_comm = 0;
};

}  // namespace

RankInterference rank_interference(std::span<const store::EventIdRow> events, const EventKindIds& kinds,
                                   const std::set<int64_t>& timed, int64_t rank, std::span<const CommSpan> others,
                                   const RankClocks* clocks) {
  RankInterference out;
  out.rank = rank;
  // Beside-ness on rank 0's clock (the other ranks' communication is on it); durations stay the rank's own.
  const auto common = [&](int64_t t) { return clocks ? clocks->to_rank0(rank, t) : t; };
  std::set<int64_t> training_threads;
  std::map<int64_t, std::vector<Span>> comm_by_thread;
  std::map<int64_t, std::vector<const store::EventIdRow*>> ops_by_thread;
  for (const auto& e : events) {
    if (e.kind == kinds.phase) training_threads.insert(e.thread);
    else if (e.kind == kinds.comm) comm_by_thread[e.thread].push_back({common(e.start_ns), common(e.end_ns)});
    else if (e.kind == kinds.op) ops_by_thread[e.thread].push_back(&e);
  }
  // An op's identity: name, layer, pass, and which call of those it is in its iteration on its thread.
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  std::map<Key, std::pair<std::vector<int64_t>, std::vector<Instance>>> by_op;  // undisturbed, disturbed
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> calls;               // per iteration, the most
  for (auto& [thread, ops] : ops_by_thread) {
    if (!training_threads.contains(thread)) continue;
    // Communication beside this thread: every other thread's on the machine.
    std::vector<Span> beside;
    for (const CommSpan& c : others) beside.push_back({c.start_ns, c.end_ns});
    for (const auto& [other, spans] : comm_by_thread) {
      if (other != thread) beside.insert(beside.end(), spans.begin(), spans.end());
    }
    const Coverage comm(std::move(beside));
    // The trees of the thread's ops (start ascending, the longer first): each op's direct children
    // are taken off its duration and its time under communication, leaving its self part's.
    std::stable_sort(ops.begin(), ops.end(), [](const auto* a, const auto* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
    });
    std::vector<Instance> inst(ops.size());
    std::vector<size_t> open;  // the ops containing the current one, innermost last
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& e = *ops[i];
      while (!open.empty() && ops[open.back()]->end_ns < e.end_ns) open.pop_back();
      const int64_t length = std::max<int64_t>(0, e.end_ns - e.start_ns);
      const int64_t under = comm.within(common(e.start_ns), common(e.end_ns));
      inst[i].self += length;
      inst[i].under_comm += under;
      if (!open.empty()) {
        inst[open.back()].self -= length;
        inst[open.back()].under_comm -= under;
      }
      open.push_back(i);
    }
    // The k-th call of (name, layer, pass) in an iteration, in start order: the same call site, and
    // so the same shapes, from one iteration to the next (ops without a layer, an optimizer's steps
    // over every parameter, and a layer's several reorders would otherwise share one reference).
    std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, int64_t> seen;  // (iteration, name, layer, pass)
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& e = *ops[i];
      if (!timed.contains(e.iteration)) continue;
      Instance in{std::max<int64_t>(0, inst[i].self), std::max<int64_t>(0, inst[i].under_comm)};
      in.under_comm = std::min(in.under_comm, in.self);
      const int64_t call = seen[{e.iteration, e.name, e.layer, e.pass}]++;
      int64_t& most = calls[{e.name, e.layer, e.pass}];
      most = std::max(most, call + 1);
      auto& [undisturbed, disturbed] = by_op[{e.name, e.layer, e.pass, call}];
      out.op_ns += in.self;
      ++out.instances;
      if (in.under_comm > 0) disturbed.push_back(in);
      else undisturbed.push_back(in.self);
    }
  }
  for (auto& [key, sides] : by_op) {
    auto& [undisturbed, disturbed] = sides;
    if (disturbed.empty()) continue;
    OpInterference op;
    std::tie(op.name, op.layer, op.pass, op.call) = key;
    op.calls = calls[{op.name, op.layer, op.pass}];
    op.undisturbed = static_cast<int64_t>(undisturbed.size());
    op.disturbed = static_cast<int64_t>(disturbed.size());
    for (const Instance& in : disturbed) op.disturbed_ns += in.self;
    out.disturbed_ns += op.disturbed_ns;
    out.disturbed_instances += op.disturbed;
    if (!undisturbed.empty()) {
      op.reference_ns = median_of(undisturbed);
      // What an undisturbed instance exceeds the reference by, on average: the excess jitter alone gives.
      int64_t above = 0;
      for (const int64_t t : undisturbed) above += std::max<int64_t>(0, t - op.reference_ns);
      const int64_t floor = above / op.undisturbed;
      for (const Instance& in : disturbed) {
        op.interference_ns += std::min(std::max<int64_t>(0, in.self - op.reference_ns), in.under_comm);
        op.jitter_ns += std::min(floor, in.under_comm);
      }
      out.covered_ns += op.disturbed_ns;
      out.covered_instances += op.disturbed;
      out.interference_ns += op.interference_ns;
      out.jitter_ns += op.jitter_ns;
      if (op.undisturbed < kThinReference) {
        out.thin_ns += op.disturbed_ns;
        out.thin_instances += op.disturbed;
      }
    }
    out.ops.push_back(op);
  }
  out.unmeasured_ns = out.disturbed_ns - out.covered_ns;
  std::stable_sort(out.ops.begin(), out.ops.end(), [](const OpInterference& a, const OpInterference& b) {
    return a.interference_ns > b.interference_ns;
  });
  return out;
}

std::vector<RankInterference> read_interference(store::Reader& reader, int64_t run, const std::set<int64_t>& timed,
                                                const RankClocks& clocks, const std::vector<std::string>& rank_hosts) {
  std::vector<RankInterference> out;
  EventKindIds kinds;
  const auto op = reader.string_id("op");
  if (!op) return out;
  kinds.op = *op;
  kinds.comm = reader.string_id("comm").value_or(-1);
  kinds.phase = reader.string_id("phase").value_or(-1);
  const auto host = [&](int64_t rank) {
    return rank >= 0 && static_cast<size_t>(rank) < rank_hosts.size() ? rank_hosts[static_cast<size_t>(rank)]
                                                                      : std::string();
  };
  const std::vector<int64_t> ranks = reader.ranks_present(run);
  // Every rank's communication on rank 0's clock, for the ranks beside it on its host.
  std::map<int64_t, std::vector<CommSpan>> comm;
  for (const int64_t rank : ranks) {
    if (host(rank).empty()) continue;
    for (const auto& e : reader.event_ids(run, rank, {"comm"}))
      comm[rank].push_back({clocks.to_rank0(rank, e.start_ns), clocks.to_rank0(rank, e.end_ns)});
  }
  for (const int64_t rank : ranks) {
    const auto events = reader.event_ids(run, rank, {"op", "comm", "phase"});
    if (events.empty()) continue;
    std::vector<CommSpan> others;
    for (const auto& [other, spans] : comm) {
      if (other != rank && !host(rank).empty() && host(other) == host(rank))
        others.insert(others.end(), spans.begin(), spans.end());
    }
    // A rank without op events in its timed iterations (untraced, a parameter server) has nothing to say.
    if (auto r = rank_interference(events, kinds, timed, rank, others, &clocks); r.instances > 0)
      out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ts::reports
