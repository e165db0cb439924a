#pragma once
// Ranges of a trace's threads (record_function phases, layers as module hooks or
// `nn.Module: NAME` stack entries mark them) and, for a point in time on a thread, the innermost
// one holding it: what the importer asks of every CPU op to give it its pass and its layer.
// Ranges on one thread nest or are disjoint, as a thread's ranges in a trace are; a range that
// overlaps another without nesting is found only where no later-starting range holds the point.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace ts::importers {

class RangeIndex {
 public:
  void add(int64_t thread, int64_t start_ns, int64_t end_ns, int32_t value) {
    by_thread_[thread].push_back({start_ns, end_ns, value, -1});
  }
  // Sorts each thread's ranges (start ascending, the longer first) and links each to the
  // innermost range holding it; call once after the last add.
  void finish() {
    for (auto& [thread, ranges] : by_thread_) {
      std::sort(ranges.begin(), ranges.end(),
                [](const Range& a, const Range& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
      std::vector<std::ptrdiff_t> open;  // the chain of ranges holding the current one
      for (size_t i = 0; i < ranges.size(); ++i) {
        while (!open.empty() && ranges[static_cast<size_t>(open.back())].end < ranges[i].end) open.pop_back();
        ranges[i].parent = open.empty() ? -1 : open.back();
        open.push_back(static_cast<std::ptrdiff_t>(i));
      }
    }
  }
  // The value of the innermost range of `thread` holding `t_ns` (its ends included).
  std::optional<int32_t> innermost(int64_t thread, int64_t t_ns) const {
    const auto it = by_thread_.find(thread);
    if (it == by_thread_.end()) return std::nullopt;
    const auto& ranges = it->second;
    auto r =
        std::upper_bound(ranges.begin(), ranges.end(), t_ns, [](int64_t t, const Range& x) { return t < x.start; });
    if (r == ranges.begin()) return std::nullopt;
    for (auto i = std::distance(ranges.begin(), r) - 1; i >= 0; i = ranges[static_cast<size_t>(i)].parent) {
      if (t_ns <= ranges[static_cast<size_t>(i)].end) return ranges[static_cast<size_t>(i)].value;
    }
    return std::nullopt;
  }
  bool empty() const { return by_thread_.empty(); }

 private:
  struct Range {
    int64_t start, end;
    int32_t value;
    std::ptrdiff_t parent;
  };
  std::map<int64_t, std::vector<Range>> by_thread_;
};

}  // namespace ts::importers
