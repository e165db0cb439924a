#include "profiler/gpu_analysis.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

namespace ts::profiler {

std::string_view to_string(GpuKind kind) {
  switch (kind) {
    case GpuKind::kernel: return "kernel";
    case GpuKind::comm: return "comm";
    case GpuKind::memcpy: return "memcpy";
    case GpuKind::memset: return "memset";
    case GpuKind::sync: return "sync";
    case GpuKind::api: return "api";
    case GpuKind::marker: return "marker";
    case GpuKind::memory: return "memory";
    case GpuKind::overhead: return "overhead";
  }
  return "unknown";
}

std::optional<GpuKind> parse_gpu_kind(std::string_view s) {
  for (GpuKind k : {GpuKind::kernel, GpuKind::comm, GpuKind::memcpy, GpuKind::memset, GpuKind::sync, GpuKind::api,
                    GpuKind::marker, GpuKind::memory, GpuKind::overhead}) {
    if (to_string(k) == s) return k;
  }
  return std::nullopt;
}

std::vector<GpuBreakdown> gpu_breakdown(std::span<const GpuActivity> activities, const IterationFilter& counted) {
  struct Acc {
    std::vector<Interval> compute, comm, memcpy, memset;
    int64_t start = 0, end = 0;
    bool any = false;
  };
  std::map<std::pair<int16_t, int32_t>, Acc> groups;
  for (const GpuActivity& a : activities) {
    if (!occupies_device(a.kind) || a.iteration < 0 || !counted(a.iteration)) continue;
    Acc& g = groups[{a.device, a.iteration}];
    const Interval i{a.start_ns, a.end_ns};
    switch (a.kind) {
      case GpuKind::kernel: g.compute.push_back(i); break;
      case GpuKind::comm: g.comm.push_back(i); break;
      case GpuKind::memcpy: g.memcpy.push_back(i); break;
      default: g.memset.push_back(i); break;
    }
    g.start = g.any ? std::min(g.start, a.start_ns) : a.start_ns;
    g.end = g.any ? std::max(g.end, a.end_ns) : a.end_ns;
    g.any = true;
  }
  std::vector<GpuBreakdown> out;
  out.reserve(groups.size());
  for (auto& [key, g] : groups) {
    GpuBreakdown b;
    b.device = key.first;
    b.iteration = key.second;
    b.start_ns = g.start;
    b.end_ns = g.end;
    // The time split of docs/design.md over compute and communication kernels...
    const Breakdown cc = breakdown(g.compute, g.comm, g.start, g.end);
    b.compute_ns = cc.compute_ns;
    b.comm_ns = cc.comm_ns;
    b.overlap_ns = cc.overlap_ns;
    b.exposed_comm_ns = cc.exposed_comm_ns;
    // ... and copies and sets as kinds of their own, which also keep the device busy.
    b.memcpy_ns = union_length(g.memcpy);
    b.memset_ns = union_length(g.memset);
    std::vector<Interval> all = std::move(g.compute);
    for (auto* v : {&g.comm, &g.memcpy, &g.memset}) all.insert(all.end(), v->begin(), v->end());
    b.busy_ns = union_length(std::move(all));
    b.idle_ns = b.span_ns() - b.busy_ns;
    out.push_back(b);
  }
  return out;
}

GpuBreakdown total(std::span<const GpuBreakdown> per_iteration) {
  GpuBreakdown t;
  t.iteration = -1;
  for (const GpuBreakdown& b : per_iteration) {
    t.device = b.device;
    t.end_ns += b.span_ns();
    t.compute_ns += b.compute_ns;
    t.comm_ns += b.comm_ns;
    t.memcpy_ns += b.memcpy_ns;
    t.memset_ns += b.memset_ns;
    t.overlap_ns += b.overlap_ns;
    t.exposed_comm_ns += b.exposed_comm_ns;
    t.busy_ns += b.busy_ns;
    t.idle_ns += b.idle_ns;
  }
  return t;
}

std::vector<OpStat> kernel_summary(std::span<const GpuActivity> activities, const NameLookup& lookup,
                                   const IterationFilter& counted) {
  std::unordered_map<StringId, std::vector<int64_t>> by_name;
  for (const GpuActivity& a : activities) {
    if (device_work(a) == GpuKind::kernel && counted(a.iteration)) {  // communication kernels too
      by_name[a.name].push_back(a.duration_ns());
    }
  }
  return duration_stats(std::move(by_name), lookup);
}

std::vector<CopyStat> copy_summary(std::span<const GpuActivity> activities, const NameLookup& lookup,
                                   const IterationFilter& counted) {
  std::unordered_map<StringId, CopyStat> by_name;
  for (const GpuActivity& a : activities) {
    // Staging copies too: communication in the breakdown, copies all the same.
    const GpuKind work = device_work(a);
    if ((work != GpuKind::memcpy && work != GpuKind::memset) || !counted(a.iteration)) continue;
    CopyStat& s = by_name[a.name];
    ++s.count;
    s.bytes += a.bytes;
    s.total_ns += a.duration_ns();
  }
  std::vector<CopyStat> out;
  out.reserve(by_name.size());
  for (auto& [name, s] : by_name) {
    s.name = std::string(lookup(name));
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const CopyStat& a, const CopyStat& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

std::vector<GpuLayerTime> gpu_layer_times(std::span<const GpuActivity> activities, const NameLookup& lookup,
                                          const IterationFilter& counted) {
  struct Acc {
    GpuLayerTime t;
    int64_t first = 0;
  };
  std::unordered_map<StringId, Acc> layers;
  for (const GpuActivity& a : activities) {
    if (!occupies_device(a.kind) || a.layer == 0 || !counted(a.iteration)) continue;
    auto [it, fresh] = layers.try_emplace(a.layer);
    Acc& acc = it->second;
    if (fresh) {
      acc.t.layer = a.layer;
      acc.first = a.start_ns;
    }
    acc.first = std::min(acc.first, a.start_ns);
    (a.pass == Pass::forward    ? acc.t.forward_ns
     : a.pass == Pass::backward ? acc.t.backward_ns
                                : acc.t.other_ns) += a.duration_ns();
    ++acc.t.activities;
  }
  std::vector<Acc*> order;
  order.reserve(layers.size());
  for (auto& [id, acc] : layers) order.push_back(&acc);
  std::sort(order.begin(), order.end(), [](const Acc* x, const Acc* y) {
    return x->first != y->first ? x->first < y->first : x->t.layer < y->t.layer;
  });
  std::vector<GpuLayerTime> out;
  out.reserve(order.size());
  for (Acc* acc : order) {
    acc->t.name = std::string(lookup(acc->t.layer));
    out.push_back(std::move(acc->t));
  }
  return out;
}

std::vector<GpuMemoryTrace> gpu_memory(std::span<const GpuActivity> activities) {
  std::map<int16_t, std::vector<const GpuActivity*>> by_device;
  for (const GpuActivity& a : activities) {
    if (a.kind == GpuKind::memory) by_device[a.device].push_back(&a);
  }
  std::vector<GpuMemoryTrace> out;
  for (auto& [device, records] : by_device) {
    // Frees before allocations at the same instant: a block handed straight back and out
    // again must not count twice.
    std::stable_sort(records.begin(), records.end(), [](const GpuActivity* x, const GpuActivity* y) {
      if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns;
      return x->bytes < y->bytes;
    });
    GpuMemoryTrace m;
    m.device = device;
    int64_t live = 0;
    for (const GpuActivity* r : records) {
      live += r->bytes;
      (r->bytes >= 0 ? m.allocations : m.frees) += 1;
      if (live > m.peak_bytes) {
        m.peak_bytes = live;
        m.peak_ns = r->start_ns;
      }
    }
    m.final_bytes = live;
    out.push_back(m);
  }
  return out;
}

}  // namespace ts::profiler
