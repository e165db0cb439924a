#include "projection/simulate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "profiler/analysis.h"
#include "vocabulary/bucket_plan.h"
#include "vocabulary/ps_polling.h"
#include "vocabulary/rates.h"

namespace ts::projection {

std::string_view to_string(Strategy s) { return s == Strategy::ps ? "ps" : "allreduce"; }

std::string knobs_json(const Knobs& k) {
  nlohmann::json j{{"strategy", to_string(k.strategy)}, {"ranks", k.ranks}};
  if (k.cores_per_rank > 0) j["cores_per_rank"] = k.cores_per_rank;
  if (k.strategy == Strategy::allreduce) {
    j["bucket_mb"] = k.bucket_mb;
    j["overlap"] = k.overlap;
    j["bucket_order"] = k.arrival_order ? "arrival" : "reverse_registration";
    j["priority"] = k.priority;
    if (k.priority) {
      j["partition_mb"] = k.partition_mb;
      j["cross_barrier"] = k.cross_barrier;
    }
  } else {
    j["ps_mode"] = vocabulary::to_string(k.ps_mode);
    if (k.ps_mode == vocabulary::PsMode::bounded) j["staleness"] = k.staleness;
    j["servers"] = 1;
    j["chunk_mb"] = k.chunk_mb;
  }
  return j.dump();
}

bool needs_forward_uses(const Knobs& k) { return k.strategy == Strategy::ps || (k.priority && k.cross_barrier); }

double Projection::median(double ProjectedIteration::*field, int rank) const {
  std::vector<double> v;
  for (const auto& it : iterations) {
    if (it.rank == rank) v.push_back(it.*field);
  }
  return vocabulary::percentile(v, 0.5);
}

namespace {

using Interval = std::pair<double, double>;

// A parameter server's walk runs again with the CPU work the last one placed until no iteration
// moves by more than this share of its time (resnet50 at 1 Gbit/s on two ranks sharing two cores:
// settled in 8 walks, its iteration 4% shorter after the second than after the first), or this many times.
constexpr double kPsWalkSettled = 1e-4;
constexpr int kPsWalksAtMost = 16;

// The breakdown of one rank's iteration from its compute intervals and its communication calls,
// as a measured run's (profiler::breakdown over the iteration's span, on whole ns): communication
// past the iteration's end (a parameter server's pushes and answers) is the next iteration's.
void finish_breakdown(ProjectedIteration& it, const std::vector<Interval>& compute) {
  const auto ns = [](double t) { return static_cast<int64_t>(std::llround(t)); };
  std::vector<profiler::Interval> cu, co;
  for (const auto& c : compute) cu.push_back({ns(c.first), ns(c.second)});
  for (const auto& c : it.calls) co.push_back({ns(c.start_ns), ns(c.end_ns)});
  const profiler::Breakdown b = profiler::breakdown(cu, co, 0, ns(it.span_ns));
  it.compute_ns = static_cast<double>(b.compute_ns);
  it.comm_ns = static_cast<double>(b.comm_ns);
  it.overlap_ns = static_cast<double>(b.overlap_ns);
  it.exposed_ns = static_cast<double>(b.exposed_comm_ns);
  it.idle_ns = static_cast<double>(std::max<int64_t>(0, b.idle_ns));
}

// One rank's iterations in order and calls on the run's clock: each call goes to the iterations
// its time falls in, cut at their ends, as a measured run's breakdown cuts the rank's timeline at
// the iterations' ends (the tail's buckets, a parameter server's pushes after a clipped backward
// and its answers); what falls between two iterations is neither's. The first iteration takes
// what came before it, and the last what ran past its end (its breakdown ends at its end).
void place_calls(const std::vector<ProjectedIteration*>& in_order, const std::vector<ProjectedCall>& calls) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& c : calls) {
    for (size_t j = 0; j < in_order.size(); ++j) {
      ProjectedIteration& it = *in_order[j];
      const double lo = j == 0 ? -inf : it.start_ns;
      const double hi = j + 1 == in_order.size() ? inf : it.start_ns + it.span_ns;
      const double a = std::max(c.start_ns, lo), b = std::min(c.end_ns, hi);
      if (b > a || (c.end_ns == c.start_ns && c.start_ns >= lo && c.start_ns < hi)) {
        ProjectedCall part = c;
        part.start_ns = a - it.start_ns;
        part.end_ns = std::max(a, b) - it.start_ns;
        it.calls.push_back(part);
      }
    }
  }
}

// The same for calls recorded from their iteration's start (a part past its end is the next's).
void carry_spilled_calls(const std::vector<ProjectedIteration*>& in_order) {
  std::vector<ProjectedCall> calls;
  for (ProjectedIteration* it : in_order) {
    for (ProjectedCall c : it->calls) {
      c.start_ns += it->start_ns;
      c.end_ns += it->start_ns;
      calls.push_back(c);
    }
    it->calls.clear();
  }
  place_calls(in_order, calls);
}

// ---- all-reduce ---------------------------------------------------------------------------

struct GroupPlan {
  std::vector<vocabulary::PlannedBucket> buckets;
};

// One step of the communication thread's work, in the time it takes with the cores to itself.
struct Segment {
  std::string what, label;
  int64_t bytes = 0;
  double solo_ns = 0;
  double share = 1;         // of a core it keeps busy
  bool collective = false;  // every rank must be in it before it moves
  int bucket = -1;          // priority's negotiation: -1; a bucket's steps: its index
  // Measured beside a busy thread (the sweep's beside figures; a collective only): the rate the
  // thread kept and the call's own pace. -1: not measured.
  double beside_rate = -1, beside_pace = -1;
};

// The cores a rank's threads share: compute (the source's threads, all busy) and the
// communication thread (busy for its share of what it runs). Where the two want more than the
// rank's cores, each gets its demand scaled down alike (the scheduler's fair share), and a call's
// CPU part slows by that while its waiting on the link does not. Where the rank is what the sweep
// measured (one compute thread on the sweep's cores per rank), the sweep's own figures hold.
struct Cores {
  double threads = 1, cores = 2;
  bool like_sweep = false;
  // (compute rate, communication rate) while both run.
  std::pair<double, double> shared(const Segment& s) const {
    if (like_sweep && s.beside_rate > 0) return {s.beside_rate, s.beside_pace > 0 ? s.beside_pace : 1.0};
    const double demand = threads + s.share;
    if (demand <= cores || s.share <= 0) return {1.0, 1.0};
    const double k = cores / demand;
    return {k, 1.0 / (s.share / k + (1 - s.share))};
  }
};

Segment collective_segment(const LinkModel& link, int64_t ranks, std::string what, std::string label, int64_t bytes,
                           int bucket) {
  Segment s{std::move(what), std::move(label), bytes, link.all_reduce_ns(bytes, ranks), link.cpu_share(bytes), true,
            bucket};
  if (!link.beside_rate_table.empty()) {
    s.beside_rate = link.beside_rate(bytes);
    s.beside_pace = link.beside_pace(bytes);
  }
  return s;
}

constexpr const char* kCopyOut = "copy out of bucket";  // a bucket's last step: its means are back

// A bucket's work on the communication thread: its gradients copied in, the all-reduce, the mean
// taken and copied back (docs/distributed.md, "What happens"). The copies at the source's
// memory-bound rate: measured here, copying in moves a bucket's bytes at about that rate (its
// traffic counted once) and the mean with the copy back take twice as long.
void add_bucket_segments(std::vector<Segment>& out, const LinkModel& link, int64_t ranks, double memory_gbps,
                         const std::string& label, int64_t bytes, int bucket) {
  const double copy_in = memory_gbps > 0 ? static_cast<double>(bytes) / memory_gbps : 0;
  out.push_back({"copy into bucket", label, bytes, copy_in, 1.0, false, bucket});
  out.push_back(collective_segment(link, ranks, "all_reduce", label, bytes, bucket));
  out.push_back({kCopyOut, label, bytes, 2 * copy_in, 1.0, false, bucket});
}

// One backward of every rank at once (the same group; each rank its own source phase): each
// rank's compute and its communication thread's buckets share the rank's cores while both run; a
// collective moves once every rank is in it, at the pace of the slowest rank's share. Ranks
// waiting for the others in a collective take no CPU (Open MPI yields while it waits).
// With cross-barrier the training thread goes on past the backward's end through its tail (up to
// the next backward) while the buckets are still in flight, its steps waiting for theirs.
class JointBackward {
 public:
  // A step of the tail: it waits until the buckets of its gate are averaged (their means copied
  // back), then computes `work`.
  struct Step {
    double work = 0;
    std::vector<int> gate;
    int iteration = 0;    // 0: the backward's iteration, 1: the next one
    std::string phase;    // the loop phase it belongs to ("" for the loop's own time between phases)
    bool compute = true;  // the training thread's compute (not the loop's own time between phases)
    double arrived = -1, went = -1, ended = -1;  // reached its gate, passed it, ended
  };
  struct Rank {
    const SourcePhase* phase = nullptr;
    ProjectedIteration* it = nullptr;
    double start = 0;  // the backward's start, on the projection's clock
    double iteration_start = 0;
    // state
    double dur = 0, work = 0, compute_end = -1, comm_end = 0;
    std::vector<double> bucket_ready;  // in work
    std::vector<bool> taken;
    size_t next = 0;
    std::vector<Segment> queue;
    double remaining = 0, seg_start = 0;
    bool in_collective = false;
    std::vector<int> mask;            // priority: the ready buckets it entered the negotiation with
    std::vector<Step> tail;           // cross-barrier; empty without
    std::vector<double> step_end;     // each tail step's end in work (the backward's is dur)
    size_t step = 0;                  // the tail step under way
    std::vector<double> bucket_done;  // when each bucket's mean was back; -1: not yet
  };

  JointBackward(const SourceRun& source, const std::vector<vocabulary::PlannedBucket>& buckets, int group,
                const LinkModel& link, const Knobs& k, const Cores& cores, std::vector<Rank> ranks)
      : source_(source),
        buckets_(buckets),
        group_(group),
        link_(link),
        k_(k),
        cores_(cores),
        ranks_(std::move(ranks)) {}

  std::vector<Rank>& run() {
    const auto& names = source_.groups[static_cast<size_t>(group_)].names;
    double t = std::numeric_limits<double>::max();
    for (auto& r : ranks_) {
      r.dur = static_cast<double>(r.phase->duration());
      std::vector<double> ready(names.size(), r.dur);
      for (const auto& [slot, off] : r.phase->ready) ready[static_cast<size_t>(slot)] = static_cast<double>(off);
      r.bucket_ready.assign(buckets_.size(), r.dur);
      if (k_.overlap) {
        for (size_t b = 0; b < buckets_.size(); ++b) {
          double at = 0;
          for (const auto& u : buckets_[b].units) at = std::max(at, ready[static_cast<size_t>(u.slot)]);
          r.bucket_ready[b] = std::min(at, r.dur);
        }
      }
      r.taken.assign(buckets_.size(), false);
      r.bucket_done.assign(buckets_.size(), -1);
      double work = r.dur;
      r.step_end.clear();
      for (const auto& s : r.tail) r.step_end.push_back(work += s.work);
      t = std::min(t, r.start);
    }
    for (int guard = 0; guard < 10'000'000; ++guard) {
      for (auto& r : ranks_) {
        if (t < r.start) continue;
        settle(r, t);
        if (r.queue.empty()) take(r, t);
      }
      // A collective every rank is in moves.
      const bool moving = collective_moving();
      double dt = std::numeric_limits<double>::max();
      bool active = false;
      double collective_rate = 1.0;
      for (auto& r : ranks_) {
        if (t < r.start) {  // not in its backward yet
          dt = std::min(dt, r.start - t);
          active = true;
          continue;
        }
        const auto [rc, rm] = rates(r, moving);
        if (r.step < r.tail.size()) active = true;  // a tail step waits for its gate
        if (computing(r)) {
          active = true;
          double target = limit(r);
          if (r.queue.empty() && r.work < r.dur) {
            for (size_t b = 0; b < buckets_.size(); ++b) {
              if (!r.taken[b] && r.bucket_ready[b] > r.work) target = std::min(target, r.bucket_ready[b]);
            }
          }
          dt = std::min(dt, (target - r.work) / rc);
        }
        if (!r.queue.empty()) {
          active = true;
          if (!r.queue.front().collective) dt = std::min(dt, r.remaining / rm);
          if (r.queue.front().collective && moving) collective_rate = std::min(collective_rate, rm);
        }
      }
      if (moving) dt = std::min(dt, ranks_.front().remaining / collective_rate);
      if (!active) break;
      if (dt == std::numeric_limits<double>::max()) break;  // every rank waits for a collective some rank never joins
      dt = std::max(dt, 0.0);
      t += dt;
      for (auto& r : ranks_) {
        if (t - dt < r.start) continue;
        const auto [rc, rm] = rates(r, moving);
        if (computing(r)) {
          const double until = limit(r);
          r.work = std::min(until, r.work + rc * dt);
          if (r.work >= until - 1e-9) r.work = until;
          if (r.work >= r.dur && r.compute_end < 0) r.compute_end = t;
        }
        if (!r.queue.empty() && (!r.queue.front().collective || moving)) {
          r.remaining -= (r.queue.front().collective ? collective_rate : rm) * dt;
        }
      }
      finish_segments(t, moving);
    }
    for (auto& r : ranks_) {
      settle(r, t);
      if (r.compute_end < 0) r.compute_end = r.start + r.dur;
      r.comm_end = std::max(r.comm_end, r.compute_end);
    }
    return ranks_;
  }

 private:
  // (compute rate, communication rate) of a rank now.
  std::pair<double, double> rates(const Rank& r, bool moving) const {
    if (r.queue.empty()) return {1.0, 1.0};
    const Segment& s = r.queue.front();
    const bool working = !s.collective || moving;  // waiting for the others takes no CPU
    if (!computing(r) || !working) return {1.0, 1.0};
    return cores_.shared(s);
  }

  // Whether the training thread computes now: in its backward, or in a tail step past its gate.
  bool computing(const Rank& r) const {
    if (r.work < r.dur) return true;
    return r.step < r.tail.size() && r.tail[r.step].went >= 0 && r.work < r.step_end[r.step];
  }
  // Where its work goes up to without a stop: the backward's end, or the tail step's.
  double limit(const Rank& r) const { return r.work < r.dur ? r.dur : r.step_end[std::min(r.step, r.tail.size() - 1)]; }

  // The tail at `t`: steps reach their gates, pass those whose buckets are averaged, end.
  void settle(Rank& r, double t) {
    if (r.work >= r.dur && r.compute_end < 0) r.compute_end = t;
    while (r.work >= r.dur && r.step < r.tail.size()) {
      Step& s = r.tail[r.step];
      if (s.arrived < 0) s.arrived = t;
      if (s.went < 0) {
        const auto averaged = [&](int b) { return r.bucket_done[static_cast<size_t>(b)] >= 0; };
        if (!std::all_of(s.gate.begin(), s.gate.end(), averaged)) return;
        s.went = t;
      }
      if (r.work < r.step_end[r.step] - 1e-9) return;
      r.work = r.step_end[r.step];
      s.ended = t;
      ++r.step;
    }
  }

  bool collective_moving() const {
    for (const auto& r : ranks_) {
      if (r.queue.empty() || !r.queue.front().collective) return false;
    }
    return true;
  }

  bool ready(const Rank& r, size_t b) const { return r.bucket_ready[b] <= r.work || r.work >= r.dur; }

  void start_front(Rank& r, double t) {
    r.remaining = r.queue.front().solo_ns;
    r.seg_start = t;
  }

  void take(Rank& r, double t) {
    if (!k_.priority) {
      if (r.next >= buckets_.size() || !ready(r, r.next)) return;
      add_bucket_segments(r.queue, link_, k_.ranks, source_.memory_gbps, label(r.next), bytes_of(r.next),
                          static_cast<int>(r.next));
      r.taken[r.next++] = true;
      start_front(r, t);
      return;
    }
    // Priority: once a bucket is ready here the rank enters the negotiation with its ready set;
    // the front-most bucket ready on every rank goes (docs/distributed.md, "priority").
    r.mask.clear();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      if (!r.taken[b] && ready(r, b)) r.mask.push_back(static_cast<int>(b));
    }
    if (r.mask.empty()) return;
    const int64_t mask_bytes = static_cast<int64_t>(buckets_.size() * sizeof(int64_t));
    r.queue.push_back(collective_segment(link_, k_.ranks, "priority negotiation", "", mask_bytes, -1));
    start_front(r, t);
  }

  // Ends what finished at `t`: local steps per rank, a moving collective on every rank at once.
  void finish_segments(double t, bool moving) {
    if (moving && ranks_.front().remaining <= 1e-6) {
      const Segment s = ranks_.front().queue.front();
      int pick = -1;
      if (s.bucket < 0) {  // the negotiation: the front-most bucket in every rank's ready set
        for (size_t b = 0; b < buckets_.size(); ++b) {
          const bool everywhere = std::all_of(ranks_.begin(), ranks_.end(), [&](const Rank& r) {
            return std::find(r.mask.begin(), r.mask.end(), static_cast<int>(b)) != r.mask.end();
          });
          if (everywhere && (pick < 0 || buckets_[b].priority < buckets_[static_cast<size_t>(pick)].priority))
            pick = static_cast<int>(b);
        }
      }
      for (auto& r : ranks_) {
        r.it->calls.push_back(
            {r.it->rank, s.label, s.what, s.bytes, r.seg_start - r.iteration_start, t - r.iteration_start});
        r.queue.erase(r.queue.begin());
        if (s.bucket < 0 && pick >= 0) {
          add_bucket_segments(r.queue, link_, k_.ranks, source_.memory_gbps, label(static_cast<size_t>(pick)),
                              bytes_of(static_cast<size_t>(pick)), pick);
          r.taken[static_cast<size_t>(pick)] = true;
        }
        if (!r.queue.empty()) start_front(r, t);
        else r.comm_end = t;
      }
    }
    for (auto& r : ranks_) {
      if (r.queue.empty() || r.queue.front().collective || r.remaining > 1e-6) continue;
      const Segment& s = r.queue.front();
      r.it->calls.push_back(
          {r.it->rank, s.label, s.what, s.bytes, r.seg_start - r.iteration_start, t - r.iteration_start});
      if (s.bucket >= 0 && s.what == kCopyOut) r.bucket_done[static_cast<size_t>(s.bucket)] = t;
      r.queue.erase(r.queue.begin());
      if (!r.queue.empty()) {
        start_front(r, t);
      } else {
        r.comm_end = t;
      }
    }
  }

  int64_t bytes_of(size_t b) const { return buckets_[b].count * static_cast<int64_t>(sizeof(float)); }
  std::string label(size_t b) const { return fmt::format("bucket {}.{}", group_, b); }

  const SourceRun& source_;
  const std::vector<vocabulary::PlannedBucket>& buckets_;
  int group_;
  const LinkModel& link_;
  const Knobs& k_;
  Cores cores_;
  std::vector<Rank> ranks_;
};

// One projected iteration of every rank: rank r replays source iteration `sources[r]` (ranks read
// different shards, so their batches differ; the source's iterations stand in for them), each
// from its own start; returns the ranks' iterations (their ends: start + span).
std::vector<ProjectedIteration> allreduce_iteration(const SourceRun& source,
                                                    const std::vector<const SourceIteration*>& sources,
                                                    const std::vector<double>& starts,
                                                    const std::vector<GroupPlan>& plans, const LinkModel& link,
                                                    const Knobs& k, const Cores& cores) {
  const size_t n = sources.size();
  std::vector<ProjectedIteration> its(n);
  std::vector<std::vector<Interval>> compute(n);
  std::vector<double> t(starts), source_end(n, 0);
  for (size_t r = 0; r < n; ++r) {
    its[r].index = sources[r]->index;
    its[r].rank = static_cast<int>(r);
    its[r].start_ns = starts[r];
  }
  // The ranks walk the same phases (one workload); the shortest list bounds them.
  size_t phases = sources[0]->phases.size();
  for (const auto* s : sources) phases = std::min(phases, s->phases.size());
  for (size_t i = 0; i < phases; ++i) {
    const SourcePhase& p0 = sources[0]->phases[i];
    const bool backward = p0.name == "backward" && p0.group >= 0;
    std::vector<JointBackward::Rank> ranks;
    for (size_t r = 0; r < n; ++r) {
      const SourcePhase& p = sources[r]->phases[i];
      t[r] += static_cast<double>(std::max<int64_t>(0, p.start_ns - static_cast<int64_t>(source_end[r])));
      source_end[r] = static_cast<double>(p.end_ns);
      if (!backward || p.group != p0.group) {
        const double dur = static_cast<double>(p.duration());
        its[r].phases.push_back({p.name, t[r] - starts[r], t[r] + dur - starts[r]});
        compute[r].emplace_back(t[r] - starts[r], t[r] + dur - starts[r]);
        t[r] += dur;
        continue;
      }
      JointBackward::Rank jr;
      jr.phase = &p;
      jr.it = &its[r];
      jr.start = t[r];
      jr.iteration_start = starts[r];
      ranks.push_back(std::move(jr));
    }
    if (ranks.size() != n) continue;  // not a backward on every rank alike
    const auto done =
        JointBackward(source, plans[static_cast<size_t>(p0.group)].buckets, p0.group, link, k, cores, std::move(ranks))
            .run();
    for (size_t r = 0; r < n; ++r) {
      const double wait = std::max(0.0, done[r].comm_end - done[r].compute_end);
      its[r].wait_ns += wait;
      its[r].phases.push_back({"backward", t[r] - starts[r], done[r].compute_end + wait - starts[r]});
      compute[r].emplace_back(t[r] - starts[r], done[r].compute_end - starts[r]);
      t[r] = done[r].compute_end + wait;
    }
  }
  for (size_t r = 0; r < n; ++r) {
    t[r] += static_cast<double>(std::max<int64_t>(0, sources[r]->span_ns - static_cast<int64_t>(source_end[r])));
    its[r].span_ns = t[r] - starts[r];
    finish_breakdown(its[r], compute[r]);
  }
  return its;
}

// The source iteration rank r replays in projected iteration j: the same one on every rank where the
// source read a rank's shard of as many ranks (the ranks' batches are alike there: the order of the
// length buckets is every rank's), else consecutive ones, as a whole data set's batches would be
// dealt out.
size_t source_index(const SourceRun& source, const Knobs& k, size_t j, int64_t r) {
  const size_t count = source.iterations.size();
  if (source.shard_ranks == k.ranks) return j % count;
  return (j * static_cast<size_t>(k.ranks) + static_cast<size_t>(r)) % count;
}

// Why a source's step cannot be cut per parameter for cross-barrier ("" where it can), as data
// parallelism decides it (distributed/data_parallel.cpp, take_split_step; a workload's split step).
std::string why_no_cross_barrier(const SourceRun& source) {
  if (source.groups.size() != 1) return "the workload's iteration has several gradient groups, each with its own step";
  if (source.groups[0].clipped)
    return "its step clips the gradients by their global norm (every one must be final first)";
  return "";
}

// The training thread's tail after backward `a`'s end with cross-barrier, up to the next backward
// (that of `b`; none after the last iteration): the rest of a's phases (its optimizer phase only
// begins the step: the updates move), then b's phases before its backward, the forward waiting,
// layer by layer at its first op, for its parameters' buckets and updating them there (the
// source's optimizer time per byte); the next backward first waits for every bucket and updates
// what the forward did not reach. After the last iteration that flush ends the iteration itself.
std::vector<JointBackward::Step> cross_barrier_tail(const SourceRun& source, const SourceIteration& a, size_t backward,
                                                    const SourceIteration* b,
                                                    const std::vector<std::vector<int>>& buckets_of, int bucket_count) {
  using Step = JointBackward::Step;
  const auto& group = source.groups[0];
  double optimizer_ns = 0;
  for (const auto& p : a.phases) {
    if (p.name == "optimizer") optimizer_ns += static_cast<double>(p.duration());
  }
  const int64_t total = group.total_bytes();
  const double per_byte = total > 0 ? optimizer_ns / static_cast<double>(total) : 0;
  std::vector<bool> updated(group.names.size(), false);
  std::vector<int> every(static_cast<size_t>(bucket_count));
  for (int i = 0; i < bucket_count; ++i) every[static_cast<size_t>(i)] = i;
  const auto updates_of = [&](const std::vector<int>& slots) {
    double ns = 0;
    for (int s : slots) {
      if (!updated[static_cast<size_t>(s)]) ns += per_byte * static_cast<double>(group.bytes[static_cast<size_t>(s)]);
      updated[static_cast<size_t>(s)] = true;
    }
    return ns;
  };
  const auto the_rest = [&] {
    std::vector<int> rest;
    for (size_t s = 0; s < updated.size(); ++s) {
      if (!updated[s]) rest.push_back(static_cast<int>(s));
    }
    return updates_of(rest);
  };
  std::vector<Step> out;
  const auto gap = [&](int64_t ns, int iteration) {
    if (ns > 0) out.push_back({static_cast<double>(ns), {}, iteration, "", false});
  };
  int64_t end = a.phases[backward].end_ns;
  for (size_t i = backward + 1; i < a.phases.size(); ++i) {
    const SourcePhase& p = a.phases[i];
    gap(p.start_ns - end, 0);
    end = p.end_ns;
    out.push_back({p.name == "optimizer" ? 0.0 : static_cast<double>(p.duration()), {}, 0, p.name});
  }
  if (!b) out.push_back({the_rest(), every, 0, "", true});  // the last step's flush, in its iteration
  gap(a.span_ns - end, 0);
  if (!b) return out;
  end = 0;
  for (const SourcePhase& p : b->phases) {
    if (p.name == "backward") break;
    gap(p.start_ns - end, 1);
    end = p.end_ns;
    if (p.name != "forward" || p.first_use.empty()) {
      out.push_back({static_cast<double>(p.duration()), {}, 1, p.name});
      continue;
    }
    std::map<int64_t, std::vector<int>> at;  // a layer's first op: its parameters (flat = slot: one group)
    for (const auto& [flat, off] : p.first_use) {
      if (flat >= 0 && static_cast<size_t>(flat) < group.names.size())
        at[std::clamp<int64_t>(off, 0, p.duration())].push_back(flat);
    }
    int64_t done = 0;
    // The first step is the forward's own, so that the phase starts where its first gate waits.
    out.push_back({0.0, {}, 1, p.name});
    for (const auto& [off, slots] : at) {
      if (off > done) out.push_back({static_cast<double>(off - done), {}, 1, p.name});
      done = off;
      std::vector<int> gate;
      for (int s : slots) {
        if (updated[static_cast<size_t>(s)]) continue;
        for (int bk : buckets_of[static_cast<size_t>(s)]) gate.push_back(bk);
      }
      std::sort(gate.begin(), gate.end());
      gate.erase(std::unique(gate.begin(), gate.end()), gate.end());
      out.push_back({updates_of(slots), std::move(gate), 1, p.name});
    }
    if (p.duration() > done) out.push_back({static_cast<double>(p.duration() - done), {}, 1, p.name});
  }
  out.push_back({the_rest(), every, 1, "backward"});
  return out;
}

// Every iteration of every rank with cross-barrier: one backward per iteration (one gradient group),
// its tail running into the next iteration, so the whole run at once. Returns by rank, then iteration.
std::vector<ProjectedIteration> cross_barrier_iterations(const SourceRun& source, const GroupPlan& plan,
                                                         const LinkModel& link, const Knobs& k, const Cores& cores) {
  using Step = JointBackward::Step;
  const size_t n = static_cast<size_t>(k.ranks), count = source.iterations.size();
  const auto& group = source.groups[0];
  std::vector<std::vector<int>> buckets_of(group.names.size());
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    for (const auto& u : plan.buckets[b].units) {
      auto& list = buckets_of[static_cast<size_t>(u.slot)];
      if (list.empty() || list.back() != static_cast<int>(b)) list.push_back(static_cast<int>(b));
    }
  }
  const auto src = [&](size_t j, size_t r) -> const SourceIteration& {
    return source.iterations[source_index(source, k, j, static_cast<int64_t>(r))];
  };
  const auto backward_of = [](const SourceIteration& it) {
    for (size_t i = 0; i < it.phases.size(); ++i) {
      if (it.phases[i].name == "backward" && it.phases[i].group == 0) return i;
    }
    throw std::invalid_argument(fmt::format("the source's iteration {} has no backward", it.index));
  };
  std::vector<std::vector<ProjectedIteration>> its(count, std::vector<ProjectedIteration>(n));
  std::vector<std::vector<std::vector<Interval>>> compute(count, std::vector<std::vector<Interval>>(n));
  std::vector<std::vector<double>> starts(count + 1, std::vector<double>(n, 0));
  std::vector<double> t(n, 0), backward_from(n, 0);
  for (size_t j = 0; j < count; ++j) {
    for (size_t r = 0; r < n; ++r) {
      its[j][r].index = src(j, r).index;
      its[j][r].rank = static_cast<int>(r);
    }
  }
  // Iteration 0 up to its backward: nothing is pending yet.
  for (size_t r = 0; r < n; ++r) {
    const SourceIteration& it = src(0, r);
    int64_t end = 0;
    for (size_t i = 0; i < backward_of(it); ++i) {
      const SourcePhase& p = it.phases[i];
      t[r] += static_cast<double>(std::max<int64_t>(0, p.start_ns - end));
      end = p.end_ns;
      its[0][r].phases.push_back({p.name, t[r], t[r] + static_cast<double>(p.duration())});
      compute[0][r].emplace_back(t[r], t[r] + static_cast<double>(p.duration()));
      t[r] += static_cast<double>(p.duration());
    }
    t[r] += static_cast<double>(std::max<int64_t>(0, it.phases[backward_of(it)].start_ns - end));
    backward_from[r] = t[r];
  }
  for (size_t j = 0; j < count; ++j) {
    std::vector<JointBackward::Rank> ranks;
    for (size_t r = 0; r < n; ++r) {
      const SourceIteration& a = src(j, r);
      const size_t bw = backward_of(a);
      JointBackward::Rank jr;
      jr.phase = &a.phases[bw];
      jr.it = &its[j][r];
      jr.start = t[r];
      jr.iteration_start = starts[j][r];
      jr.tail = cross_barrier_tail(source, a, bw, j + 1 < count ? &src(j + 1, r) : nullptr, buckets_of,
                                   static_cast<int>(plan.buckets.size()));
      ranks.push_back(std::move(jr));
    }
    const auto done = JointBackward(source, plan.buckets, 0, link, k, cores, std::move(ranks)).run();
    for (size_t r = 0; r < n; ++r) {
      const auto& d = done[r];
      its[j][r].phases.push_back({"backward", backward_from[r], d.compute_end});
      compute[j][r].emplace_back(t[r], d.compute_end);
      double last = d.compute_end;
      starts[j + 1][r] = -1;
      for (const Step& s : d.tail) {
        if (s.iteration == 1 && starts[j + 1][r] < 0) starts[j + 1][r] = s.arrived;
        last = s.ended;
      }
      if (starts[j + 1][r] < 0) starts[j + 1][r] = last;
      for (size_t i = 0; i < d.tail.size(); ++i) {
        const Step& s = d.tail[i];
        auto& it = its[j + static_cast<size_t>(s.iteration)][r];
        auto& cu = compute[j + static_cast<size_t>(s.iteration)][r];
        it.wait_ns += s.went - s.arrived;
        if (s.compute && s.ended > s.went) cu.emplace_back(s.went, s.ended);
        if (s.phase.empty() || s.phase == "backward") continue;
        const bool continues = i > 0 && d.tail[i - 1].phase == s.phase && d.tail[i - 1].iteration == s.iteration;
        if (continues) it.phases.back().end_ns = s.ended;
        else it.phases.push_back({s.phase, s.arrived, s.ended});
      }
      // The next backward begins with its wait for the last buckets and the updates left.
      backward_from[r] = d.tail.empty() || d.tail.back().phase != "backward" ? last : d.tail.back().arrived;
      t[r] = last;
    }
  }
  // Every time above is on the run's clock: to each iteration's own (the calls are recorded from
  // it already); the communication that spilled past an iteration's end is the next one's.
  std::vector<ProjectedIteration> out;
  for (size_t r = 0; r < n; ++r) {
    std::vector<ProjectedIteration*> in_order;
    for (size_t j = 0; j < count; ++j) {
      ProjectedIteration& it = its[j][r];
      const double s0 = starts[j][r];
      it.start_ns = s0;
      it.span_ns = starts[j + 1][r] - s0;
      for (auto& p : it.phases) {
        p.start_ns -= s0;
        p.end_ns -= s0;
      }
      for (auto& c : compute[j][r]) {
        c.first -= s0;
        c.second -= s0;
      }
      in_order.push_back(&it);
    }
    carry_spilled_calls(in_order);
    for (size_t j = 0; j < count; ++j) {
      finish_breakdown(its[j][r], compute[j][r]);
      out.push_back(std::move(its[j][r]));
    }
  }
  return out;
}

std::vector<GroupPlan> plan_groups(const SourceRun& source, const Knobs& k, std::vector<int64_t>& bytes_out) {
  using vocabulary::mib_to_floats;
  const int64_t cap = mib_to_floats(k.priority ? k.partition_mb : k.bucket_mb);
  const int64_t piece = k.priority ? cap : std::numeric_limits<int64_t>::max();
  std::vector<GroupPlan> plans;
  for (const auto& g : source.groups) {
    std::vector<int64_t> counts;
    for (int64_t b : g.bytes) counts.push_back(b / static_cast<int64_t>(sizeof(float)));
    std::vector<int> order;
    if (k.priority) {  // front-first partitions
      for (size_t s = 0; s < counts.size(); ++s) order.push_back(static_cast<int>(s));
    } else if (k.arrival_order) {
      order = g.arrival;
    } else {
      for (size_t s = counts.size(); s-- > 0;) order.push_back(static_cast<int>(s));
    }
    GroupPlan plan{vocabulary::plan_buckets(counts, order, cap, piece)};
    for (const auto& b : plan.buckets) bytes_out.push_back(b.count * static_cast<int64_t>(sizeof(float)));
    plans.push_back(std::move(plan));
  }
  return plans;
}

// ---- parameter server, one server shard on worker 0's host ------------------------------------

struct Key {
  int flat = 0;  // its parameter
  int group = 0;
  int64_t bytes = 0;
};

// A thread, or one direction of a host's link, which does one thing at a time: its bookings,
// sorted and disjoint. A booking takes the first gap at or after its ready time that holds it.
// The walk books round by round (every worker's iteration n, then n + 1); where the workers drift
// apart (the asynchronous modes) a later round's message can come before an earlier round's on
// the run's clock, and it takes the gap the earlier ones left: the first ready is taken first.
class Timeline {
 public:
  double first_fit(double ready, double ns) const {
    double s = ready;
    auto it =
        std::lower_bound(busy_.begin(), busy_.end(), ready, [](const Interval& b, double t) { return b.second <= t; });
    for (; it != busy_.end() && it->first < s + ns; ++it) s = std::max(s, it->second);
    return s;
  }
  void book(double start, double end) {
    auto it =
        std::lower_bound(busy_.begin(), busy_.end(), start, [](const Interval& b, double t) { return b.second < t; });
    while (it != busy_.end() && it->first <= end) {  // overlapping or touching: one booking
      start = std::min(start, it->first);
      end = std::max(end, it->second);
      it = busy_.erase(it);
    }
    busy_.insert(it, {start, end});
  }

 private:
  std::vector<Interval> busy_;
};

// The first start at or after `ready` at which every one of `lines` is free for `ns`; booked.
double book_all(std::initializer_list<Timeline*> lines, double ready, double ns) {
  double s = ready;
  for (bool agreed = false; !agreed;) {
    agreed = true;
    for (const Timeline* l : lines) {
      const double t = l->first_fit(s, ns);
      if (t != s) agreed = false;
      s = t;
    }
  }
  for (Timeline* l : lines) l->book(s, s + ns);
  return s;
}

// The answers a worker's receiving thread has had for a key: (the clock it answers, when it
// arrived), in the order they came.
struct Answers {
  std::vector<std::pair<int64_t, double>> got;
  // When a value answering at least `clock` pushes had arrived (the initial values answer 0;
  // one that never came: never, +inf).
  double at(int64_t clock) const {
    if (clock <= 0) return 0;
    double t = std::numeric_limits<double>::infinity();
    for (const auto& [c, when] : got) {
      if (c >= clock) t = std::min(t, when);
    }
    return t;
  }
};

// The keys a parameter server holds: every parameter cut into chunks of `chunk_mb` (as ps_job's).
struct KeyPlan {
  std::vector<Key> keys;
  std::vector<std::vector<int>> keys_of;  // by flat parameter
  int64_t total_bytes = 0;
};

KeyPlan plan_keys(const SourceRun& source, double chunk_mb, std::vector<int64_t>& key_bytes) {
  const int64_t chunk = vocabulary::mib_to_floats(chunk_mb) * static_cast<int64_t>(sizeof(float));
  KeyPlan plan;
  plan.keys_of.resize(static_cast<size_t>(source.parameter_count()));
  for (size_t g = 0; g < source.groups.size(); ++g) {
    for (size_t s = 0; s < source.groups[g].bytes.size(); ++s) {
      const int flat = source.flat(static_cast<int>(g), static_cast<int>(s));
      for (int64_t off = 0; off < source.groups[g].bytes[s]; off += chunk) {
        plan.keys_of[static_cast<size_t>(flat)].push_back(static_cast<int>(plan.keys.size()));
        plan.keys.push_back({flat, static_cast<int>(g), std::min(chunk, source.groups[g].bytes[s] - off)});
        key_bytes.push_back(plan.keys.back().bytes);
        plan.total_bytes += plan.keys.back().bytes;
      }
    }
  }
  return plan;
}

// A parameter server's messages on a rank's cores. A key's message: besides its trip across the
// link (a round trip's latency for MPI's handshake of a large message), the wire's copies
// (distributed/ps/wire.cpp: the sender fills a fresh buffer and copies the key in, the receiver a
// fresh buffer that it copies out of: four passes over the bytes) and the receiving thread's wait
// for its next poll (half its longest sleep). Where the ranks have no core to spare, the parameter
// server's threads (sender, receiver, server) share the rank's cores with its compute: their CPU
// work (the copies, the update, the CPU's share of a transfer as the sweep measured it) at the
// fair share left to one more thread.
struct PsWire {
  const LinkModel& link;
  double mem = 1;       // the source's memory-bound rate, bytes per ns
  double cpu_pace = 1;  // the share of a core one more thread gets beside `compute_threads` busy ones
  double poll_ns = static_cast<double>(vocabulary::kPsMaxSleepUs) * 1e3 / 2;

  PsWire(const SourceRun& source, const LinkModel& l, double compute_threads, double cores)
      : link(l),
        mem(source.memory_gbps > 0 ? source.memory_gbps : 1.0),
        cpu_pace(std::min(1.0, cores / (compute_threads + 1))) {}
  double local_copy(int64_t bytes) const { return 2.0 * static_cast<double>(bytes) / mem; }
  double message(int64_t bytes) const { return 4.0 * static_cast<double>(bytes) / mem / cpu_pace + poll_ns; }
  double transfer(int64_t bytes) const {
    const double moving = link.p2p_ns(bytes), share = link.cpu_share(bytes);
    return moving * (1 - share) + moving * share / cpu_pace + link.p2p_latency_ns + message(bytes);
  }
  // The CPU work a transfer makes on each side: its copies, the CPU's share of its time on the link.
  double side_demand(int64_t bytes) const {
    return 2.0 * static_cast<double>(bytes) / mem + link.p2p_ns(bytes) * link.cpu_share(bytes);
  }
};

// The CPU work of those threads on each rank, in time (a message's copies on each side, the CPU's
// share of its transfer there, the server's sums and updates on worker 0). Fair share: while a
// thread does D of CPU work beside compute, compute loses D (1 - pace) / pace.
struct CpuWork {
  double start, end, demand;
};
using CpuWorks = std::vector<std::vector<CpuWork>>;

// The demand of `work` within [lo, hi): each piece's share by its overlap.
double demand_within(const std::vector<CpuWork>& work, double lo, double hi) {
  double demand = 0;
  for (const auto& c : work) {
    const double a = std::max(lo, c.start), b = std::min(hi, c.end);
    if (b > a && c.end > c.start) demand += c.demand * (b - a) / (c.end - c.start);
  }
  return demand;
}

// One walk through every round of a parameter server's projection (every worker's iteration n).
struct PsWalk {
  std::vector<std::vector<ProjectedIteration>> every;  // by round, by worker
  std::vector<std::vector<std::vector<Interval>>> compute;
  std::vector<std::vector<ProjectedCall>> calls;  // by worker, on the run's clock
  CpuWorks cpu_work;
};

// A worker's compute and the parameter server's work beside it depend on each other, and a phase
// is placed before the work of the rounds after it (and, in a backward, before the server's
// answers during it): `walk` (given the CPU work the last walk placed, none the first time) runs
// again until no iteration moves by more than kPsWalkSettled. The pushes and answers then go to
// the iterations they ran in (cut at their ends); the rounds before `first_counted` (a pipeline's
// fill) pass what ran past them on to the first counted one and are dropped. By worker, then round.
template <class WalkOnce>
std::vector<ProjectedIteration> settle_walks(WalkOnce&& walk, size_t workers, size_t first_counted) {
  PsWalk w = walk(CpuWorks{});
  for (int pass = 1; pass < kPsWalksAtMost; ++pass) {
    PsWalk again = walk(w.cpu_work);
    bool settled = true;
    for (size_t n = 0; n < w.every.size() && settled; ++n) {
      for (size_t v = 0; v < workers; ++v) {
        const double a = w.every[n][v].span_ns, b = again.every[n][v].span_ns;
        if (std::abs(a - b) > kPsWalkSettled * a) settled = false;
      }
    }
    w = std::move(again);
    if (settled) break;
  }
  std::vector<ProjectedIteration> out;
  for (size_t v = 0; v < workers; ++v) {
    std::vector<ProjectedIteration*> in_order;
    for (auto& its : w.every) in_order.push_back(&its[v]);
    place_calls(in_order, w.calls[v]);
    for (size_t n = first_counted; n < w.every.size(); ++n) {
      finish_breakdown(w.every[n][v], w.compute[n][v]);
      out.push_back(std::move(w.every[n][v]));
    }
  }
  return out;
}

// The threads and link ways a walk's messages hold (each host's link both ways, one rank per host;
// the server's receiving and serving threads, worker 0's), and the calls and CPU work they make,
// which go to the walk.
struct PsNet {
  const PsWire& wire;
  PsWalk& walk;
  std::vector<Timeline> out_of, into;
  Timeline receiver, server;

  PsNet(const PsWire& w, PsWalk& into_walk, size_t ranks) : wire(w), walk(into_walk), out_of(ranks), into(ranks) {}
  // Worker w's message of `bytes`, its sender ready at `ready`, taken by the receiving thread
  // (across the link from a remote worker); returns when the receiver has it all.
  double push(int w, double ready, int64_t bytes) {
    const auto wi = static_cast<size_t>(w);
    if (w == 0) {
      const double s0 = book_all({&receiver}, ready, wire.message(bytes)), s1 = s0 + wire.message(bytes);
      walk.cpu_work[0].push_back({s0, s1, 4.0 * static_cast<double>(bytes) / wire.mem});  // both sides here
      return s1;
    }
    const double s0 = book_all({&receiver, &out_of[wi], &into[0]}, ready, wire.transfer(bytes));
    const double s1 = s0 + wire.transfer(bytes);
    walk.cpu_work[wi].push_back({s0, s1, wire.side_demand(bytes)});
    walk.cpu_work[0].push_back({s0, s1, wire.side_demand(bytes)});
    return s1;
  }
  // The server's update of a key (`work` long) in its thread's first gap from `in` on, recorded as
  // rank 0's "ps update"; returns its start. The thread is booked by the caller, answers included.
  double update(double in, int64_t bytes, double work) {
    const double s0 = server.first_fit(in, work);
    walk.calls[0].push_back({0, "", "ps update", bytes, s0, s0 + work});
    walk.cpu_work[0].push_back({s0, s0 + work, work * wire.cpu_pace});
    return s0;
  }
  // A blocking send of the server's thread from `ts` on to worker v (to its own rank's receiver for
  // worker 0), recorded as rank 0's "ps reply" (as a measured run records it); returns its end.
  double reply(int v, double ts, int64_t bytes) {
    const auto vi = static_cast<size_t>(v);
    double r0 = ts, r1 = ts + wire.message(bytes);
    if (v == 0) {
      walk.cpu_work[0].push_back({r0, r1, 4.0 * static_cast<double>(bytes) / wire.mem});
    } else {
      r0 = book_all({&out_of[0], &into[vi]}, ts, wire.transfer(bytes));
      r1 = r0 + wire.transfer(bytes);
      walk.cpu_work[0].push_back({r0, r1, wire.side_demand(bytes)});
      walk.cpu_work[vi].push_back({r0, r1, wire.side_demand(bytes)});
    }
    walk.calls[0].push_back({0, "", "ps reply", bytes, r0, r1});
    return r1;
  }
};

std::vector<ProjectedIteration> ps_iterations(const SourceRun& source, const LinkModel& link, const Knobs& k,
                                              std::vector<int64_t>& key_bytes) {
  const int workers = static_cast<int>(k.ranks);
  const auto ws = static_cast<size_t>(workers);
  const bool sync = k.ps_mode == vocabulary::PsMode::sync;
  const KeyPlan plan = plan_keys(source, k.chunk_mb, key_bytes);
  const std::vector<Key>& keys = plan.keys;
  const auto& keys_of = plan.keys_of;
  const int64_t total_bytes = plan.total_bytes;
  const double threads = static_cast<double>(std::max<int64_t>(1, source.run.threads));
  const PsWire wire(source, link, threads, k.cores_per_rank > 0 ? k.cores_per_rank : threads + 1);
  const double cpu_pace = wire.cpu_pace;
  // One walk through every round (the pipeline's fill first); `beside` is the CPU work the last
  // walk placed (empty the first time: then a phase sees the work placed before it).
  const auto walk = [&](const CpuWorks& beside) {
    PsWalk out;
    out.cpu_work.resize(ws);
    out.calls.resize(ws);
    const CpuWorks& cpu_work = out.cpu_work;
    const auto lost_within = [&](int w, double lo, double hi) {
      if (!(cpu_pace < 1)) return 0.0;
      return demand_within((beside.empty() ? cpu_work : beside)[static_cast<size_t>(w)], lo, hi) * (1 - cpu_pace) /
             cpu_pace;
    };
    PsNet net(wire, out, ws);
    // Per worker and key: the pushes it made (its clock), the answers it had; per key and worker,
    // the pushes the server applied (or summed); bounded mode's reads not answered yet.
    std::vector<std::vector<int64_t>> clock(ws, std::vector<int64_t>(keys.size(), 0));
    std::vector<std::vector<Answers>> answers(ws, std::vector<Answers>(keys.size()));
    std::vector<std::vector<int64_t>> applied(keys.size(), std::vector<int64_t>(ws, 0));
    std::vector<std::vector<std::pair<int, int64_t>>> held(keys.size());  // (worker, clock)
    std::vector<double> sender_free(ws, 0), end_of(ws, 0);
    // An answer to worker v that reflects `answers_clock` of its pushes, sent from `ts` on.
    const auto reply = [&](int key, int v, int64_t answers_clock, double ts) {
      const double r1 = net.reply(v, ts, keys[static_cast<size_t>(key)].bytes);
      answers[static_cast<size_t>(v)][static_cast<size_t>(key)].got.emplace_back(answers_clock, r1);
      return r1;
    };
    // A worker's backward, its compute placed once every worker's pushes are.
    struct Push {
      double ready = 0;
      int flat = 0, key = 0;
    };
    struct Backward {
      bool on = false;
      double from = 0, b0 = 0, dur = 0;
      int group = 0;
      std::vector<Push> pushes;  // in the order its sender takes them
    };
    // The first source iteration runs twice: once to fill the pipeline (the pulls a forward waits
    // for are the previous iteration's), once counted.
    for (size_t n = 0; n <= source.iterations.size(); ++n) {
      const size_t j = n == 0 ? 0 : n - 1;
      std::vector<const SourceIteration*> mine;
      for (int w = 0; w < workers; ++w) mine.push_back(&source.iterations[source_index(source, k, j, w)]);
      // Sync mode: the workers agree each step whether to stop (a blocking all-reduce of a flag);
      // otherwise each worker decides for itself and goes on.
      std::vector<double> start = end_of;
      if (sync) {
        start.assign(ws, *std::max_element(end_of.begin(), end_of.end()) + link.all_reduce_ns(8, workers));
      }
      // The optimizer's time per byte, which the server spends instead of the workers.
      double optimizer_ns = 0;
      for (const auto& p : mine[0]->phases) {
        if (p.name == "optimizer") optimizer_ns += static_cast<double>(p.duration());
      }
      const double update_ns_per_byte = total_bytes > 0 ? optimizer_ns / static_cast<double>(total_bytes) : 0;
      std::vector<ProjectedIteration> its(ws);
      std::vector<std::vector<Interval>> compute(ws);
      std::vector<double> t = start, source_end(ws, 0);
      for (int w = 0; w < workers; ++w) {
        ProjectedIteration& it = its[static_cast<size_t>(w)];
        it.index = mine[static_cast<size_t>(w)]->index;
        it.rank = w;
        it.start_ns = start[static_cast<size_t>(w)];
      }
      // Phase by phase on every worker, so that each step's pushes are answered before the forward
      // that needs them (wgan's critic steps: five of them an iteration).
      size_t phases = mine[0]->phases.size();
      for (const auto* m : mine) phases = std::min(phases, m->phases.size());
      for (size_t i = 0; i < phases; ++i) {
        std::vector<Backward> backward(ws);  // this phase's, where it is one
        for (int w = 0; w < workers; ++w) {
          const auto wi = static_cast<size_t>(w);
          const SourcePhase& p = mine[wi]->phases[i];
          ProjectedIteration& it = its[wi];
          const double s0 = start[wi];
          double& tw = t[wi];
          tw += static_cast<double>(std::max<int64_t>(0, p.start_ns - static_cast<int64_t>(source_end[wi])));
          source_end[wi] = static_cast<double>(p.end_ns);
          const double dur = static_cast<double>(p.duration());
          if (p.name == "optimizer") {  // the servers run the optimizer: the worker's phase is empty
            it.phases.push_back({p.name, tw - s0, tw - s0});
            continue;
          }
          if (p.name == "forward") {
            // Each layer waits for its parameters' values before its first op (the gate): the answer
            // to its last push (eager: to the one before).
            const int64_t lag = k.ps_mode == vocabulary::PsMode::eager ? 1 : 0;
            std::vector<std::pair<int64_t, int>> uses;
            for (const auto& [flat, off] : p.first_use) uses.emplace_back(off, flat);
            std::sort(uses.begin(), uses.end());
            const double f0 = tw;
            double waited = 0, cursor = f0;
            for (const auto& [off, flat] : uses) {
              const double at = f0 + static_cast<double>(off) + waited;
              double need = 0;
              for (int key : keys_of[static_cast<size_t>(flat)]) {
                const double in = answers[wi][static_cast<size_t>(key)].at(clock[wi][static_cast<size_t>(key)] - lag);
                if (std::isfinite(in)) need = std::max(need, in);
              }
              if (need > at) {  // a pull wait: the forward computes up to here and resumes when it is in
                compute[wi].emplace_back(cursor, at);
                cursor = need;
                waited += need - at;
              }
            }
            it.wait_ns += waited;
            const double lost = lost_within(w, f0, f0 + dur + waited);  // the server's answers beside it
            it.phases.push_back({p.name, f0 - s0, f0 + dur + waited + lost - s0});
            compute[wi].emplace_back(cursor, f0 + dur + waited + lost);
            tw = f0 + dur + waited + lost;
            continue;
          }
          if (p.name != "backward" || p.group < 0) {
            it.phases.push_back({p.name, tw - s0, tw + dur - s0});
            compute[wi].emplace_back(tw, tw + dur);
            tw += dur;
            continue;
          }
          // At most one step of pushes in flight: the backward first waits for the last to be sent.
          const double push_wait = std::max(0.0, sender_free[wi] - tw);
          it.wait_ns += push_wait;
          Backward& bw = backward[wi];
          bw.on = true;
          bw.from = tw;
          bw.b0 = tw + push_wait;
          bw.dur = dur;
          bw.group = p.group;
          const auto& group = source.groups[static_cast<size_t>(p.group)];
          std::vector<std::pair<double, int>> ready;  // (time, flat)
          std::vector<bool> seen(group.names.size(), false);
          for (const auto& [slot, off] : p.ready) {
            // A clipped group is pushed after backward, in registration order.
            ready.emplace_back(group.clipped ? bw.b0 + dur : bw.b0 + static_cast<double>(off),
                               source.flat(p.group, slot));
            seen[static_cast<size_t>(slot)] = true;
          }
          for (size_t sl = 0; sl < seen.size(); ++sl) {
            if (!seen[sl]) ready.emplace_back(bw.b0 + dur, source.flat(p.group, static_cast<int>(sl)));
          }
          std::stable_sort(ready.begin(), ready.end());
          for (const auto& [r, flat] : ready) {
            for (int key : keys_of[static_cast<size_t>(flat)]) bw.pushes.push_back({r, flat, key});
          }
        }
        // The backwards' pushes, every worker's at once: the server's one receiving thread takes
        // one message at a time, the first sender ready first (worker 0's own pushes wait behind
        // a remote one being received, as measured: a matched probe, then the whole message).
        struct Arrival {
          double in = 0;
          int key = 0, worker = 0;
        };
        std::vector<Arrival> arrivals;
        std::vector<size_t> next(ws, 0);
        std::vector<double> sender(ws, 0);
        for (int w = 0; w < workers; ++w) {
          const Backward& bw = backward[static_cast<size_t>(w)];
          if (bw.on) sender[static_cast<size_t>(w)] = std::max(sender_free[static_cast<size_t>(w)], bw.b0);
        }
        for (;;) {
          int w = -1;
          double earliest = 0;
          for (int v = 0; v < workers; ++v) {
            const Backward& bw = backward[static_cast<size_t>(v)];
            if (!bw.on || next[static_cast<size_t>(v)] >= bw.pushes.size()) continue;
            const double at = std::max(sender[static_cast<size_t>(v)], bw.pushes[next[static_cast<size_t>(v)]].ready);
            if (w < 0 || at < earliest) {
              w = v;
              earliest = at;
            }
          }
          if (w < 0) break;
          const auto wi = static_cast<size_t>(w);
          Backward& bw = backward[wi];
          const Push& push = bw.pushes[next[wi]++];
          const int64_t bytes = keys[static_cast<size_t>(push.key)].bytes;
          const double s1 = net.push(w, earliest, bytes);
          const auto& group = source.groups[static_cast<size_t>(bw.group)];
          // The push as its sender sees it: from its send to the receiver's taking the whole message.
          out.calls[wi].push_back(
              {w, group.names[static_cast<size_t>(push.flat - source.flat(bw.group, 0))], "push", bytes, earliest, s1});
          clock[wi][static_cast<size_t>(push.key)] += 1;
          arrivals.push_back({s1, push.key, w});
          sender[wi] = s1;
        }
        for (int w = 0; w < workers; ++w) {
          const auto wi = static_cast<size_t>(w);
          const Backward& bw = backward[wi];
          if (!bw.on) continue;
          sender_free[wi] = sender[wi];
          const double lost = lost_within(w, bw.b0, bw.b0 + bw.dur);  // its pushes beside it (and the server's work)
          its[wi].phases.push_back({"backward", bw.from - start[wi], bw.b0 + bw.dur + lost - start[wi]});
          compute[wi].emplace_back(bw.b0, bw.b0 + bw.dur + lost);
          t[wi] = bw.b0 + bw.dur + lost;
        }
        // The server (a thread of worker 0) takes the pushes in the order they came in.
        std::stable_sort(arrivals.begin(), arrivals.end(),
                         [](const Arrival& a, const Arrival& b) { return a.in < b.in; });
        if (sync) {
          // Each key once every worker's push is in, in that order: the sum, the update (the
          // source's optimizer time per byte), an answer to every worker, each a blocking send.
          std::vector<std::pair<double, int>> complete;
          for (const auto& a : arrivals) {
            auto& in = applied[static_cast<size_t>(a.key)];
            in[static_cast<size_t>(a.worker)] += 1;
            if (a.worker == 0) complete.emplace_back(0, a.key);
          }
          for (auto& [in, key] : complete) {
            for (const auto& a : arrivals) {
              if (a.key == key) in = std::max(in, a.in);
            }
          }
          std::stable_sort(complete.begin(), complete.end());
          for (const auto& [in, key] : complete) {
            const int64_t bytes = keys[static_cast<size_t>(key)].bytes;
            const double work = (static_cast<double>(workers) * wire.local_copy(bytes) / 2 +
                                 update_ns_per_byte * static_cast<double>(bytes)) /
                                cpu_pace;
            const double s0 = net.update(in, bytes, work);
            double ts = s0 + work;
            for (int v = 0; v < workers; ++v)
              ts = reply(key, v, clock[static_cast<size_t>(v)][static_cast<size_t>(key)], ts);
            net.server.book(s0, ts);
          }
          continue;
        }
        // async, bounded, eager: every push is an update of its own (its copy out of the message and
        // the optimizer's step), answered as the mode says.
        for (const auto& a : arrivals) {
          const auto key = static_cast<size_t>(a.key);
          const int64_t bytes = keys[key].bytes;
          const double work = (wire.local_copy(bytes) / 2 + update_ns_per_byte * static_cast<double>(bytes)) / cpu_pace;
          const double s0 = net.update(a.in, bytes, work);
          double ts = s0 + work;
          applied[key][static_cast<size_t>(a.worker)] += 1;
          if (k.ps_mode == vocabulary::PsMode::eager) {
            // The new value to every worker at once, unasked.
            for (int v = 0; v < workers; ++v) ts = reply(a.key, v, applied[key][static_cast<size_t>(v)], ts);
          } else {
            // The pusher's read; bounded: held while the pusher is more than `staleness` pushes of
            // this key ahead of the slowest worker, and answered once it no longer is.
            held[key].emplace_back(a.worker, applied[key][static_cast<size_t>(a.worker)]);
            const int64_t slowest = *std::min_element(applied[key].begin(), applied[key].end());
            std::vector<std::pair<int, int64_t>> still;
            for (const auto& [v, c] : held[key]) {
              if (k.ps_mode == vocabulary::PsMode::bounded && c - slowest > k.staleness) {
                still.emplace_back(v, c);
                continue;
              }
              ts = reply(a.key, v, c, ts);
            }
            held[key] = std::move(still);
          }
          net.server.book(s0, ts);
        }
      }
      for (int w = 0; w < workers; ++w) {
        const auto wi = static_cast<size_t>(w);
        double& tw = t[wi];
        tw += static_cast<double>(std::max<int64_t>(0, mine[wi]->span_ns - static_cast<int64_t>(source_end[wi])));
        end_of[wi] = tw;
        its[wi].span_ns = tw - start[wi];
        for (auto& c : compute[wi]) {
          c.first -= start[wi];
          c.second -= start[wi];
        }
      }
      out.every.push_back(std::move(its));
      out.compute.push_back(std::move(compute));
    }
    return out;
  };

  return settle_walks(walk, ws, 1);
}

// ---- actor-learners on an asynchronous parameter server (a3c) -----------------------------------

// Every rank replays the source's iterations with its learners: each update goes to the learner
// free first (the tickets a3c's learners take), computes as in the source less its local step,
// and pushes every key of its gradients (workloads/a3c: the learner's push after clipping). At
// most two updates wait to be sent (distributed/ps/worker.cpp): a third push waits for the older
// one's last key. The sender sends the keys one at a time, the server's receiving thread takes
// them one at a time, and the server updates each (the source's step per byte) and answers the
// pusher (async) or every worker (eager). A learner's read takes the newest values that have
// arrived and never waits, so the answers only take CPU and link. As in ps_iterations, the walk
// repeats with the CPU work the last one placed until it settles.
std::vector<ProjectedIteration> learner_iterations(const SourceRun& source, const LinkModel& link, const Knobs& k,
                                                   std::vector<int64_t>& key_bytes) {
  const int workers = static_cast<int>(k.ranks);
  const auto ws = static_cast<size_t>(workers);
  const KeyPlan plan = plan_keys(source, k.chunk_mb, key_bytes);
  const auto learners = static_cast<size_t>(std::max(1, source.learners));
  const double threads = static_cast<double>(learners);  // each learner computes on one thread
  const double cores = k.cores_per_rank > 0 ? k.cores_per_rank : threads + 1;
  const PsWire wire(source, link, threads, cores);
  // The server's update of a key: the source's local step per byte.
  double step_ns = 0, steps = 0;
  for (const auto& it : source.iterations) {
    for (const auto& u : it.updates) {
      step_ns += static_cast<double>(u.step_ns);
      steps += 1;
    }
  }
  const double update_ns_per_byte =
      steps > 0 && plan.total_bytes > 0 ? step_ns / steps / static_cast<double>(plan.total_bytes) : 0;
  // L learners busy on c cores and one more thread's CPU work D beside them: each learner gets its
  // share c / L less that thread's, and finishes D / c later.
  const double lost_per_demand = wire.cpu_pace < 1 ? 1.0 / cores : 0.0;

  const auto walk = [&](const CpuWorks& beside) {
    PsWalk out;
    out.cpu_work.resize(ws);
    out.calls.resize(ws);
    out.every.assign(source.iterations.size(), std::vector<ProjectedIteration>(ws));
    out.compute.assign(source.iterations.size(), std::vector<std::vector<Interval>>(ws));
    const CpuWorks& cpu_work = out.cpu_work;
    PsNet net(wire, out, ws);
    std::vector<double> end_of(ws, 0), sender_free(ws, 0);
    std::vector<std::vector<double>> sent(ws);  // each worker's updates: when their last key was sent
    // The server's thread takes a push that came in at `in`: the update, then its answers.
    const auto serve = [&](int key, int pusher, double in) {
      const int64_t bytes = plan.keys[static_cast<size_t>(key)].bytes;
      const double work =
          (wire.local_copy(bytes) / 2 + update_ns_per_byte * static_cast<double>(bytes)) / wire.cpu_pace;
      const double s0 = net.update(in, bytes, work);
      double ts = s0 + work;
      for (int v = 0; v < workers; ++v) {
        if (v == pusher || k.ps_mode == vocabulary::PsMode::eager) ts = net.reply(v, ts, bytes);
      }
      net.server.book(s0, ts);
    };
    for (size_t j = 0; j < source.iterations.size(); ++j) {
      for (int w = 0; w < workers; ++w) {
        const auto wi = static_cast<size_t>(w);
        const SourceIteration& si = source.iterations[source_index(source, k, j, w)];
        ProjectedIteration it;
        it.index = si.index;
        it.rank = w;
        it.start_ns = end_of[wi];
        std::vector<double> free(learners, it.start_ns);
        std::vector<Interval> compute;
        for (const SourceUpdate& u : si.updates) {
          const auto l = static_cast<size_t>(std::min_element(free.begin(), free.end()) - free.begin());
          const double c0 = free[l];
          const double dur = static_cast<double>(std::max<int64_t>(0, u.end_ns - u.start_ns - u.step_ns));
          const double lost = demand_within((beside.empty() ? cpu_work : beside)[wi], c0, c0 + dur) * lost_per_demand;
          const double c1 = c0 + dur + lost;
          compute.emplace_back(c0, c1);
          // The push: once fewer than two of this worker's updates wait to be sent.
          auto& mine = sent[wi];
          const double push = mine.size() >= 2 ? std::max(c1, mine[mine.size() - 2]) : c1;
          it.wait_ns += push - c1;
          it.phases.push_back({"update", c0 - it.start_ns, push - it.start_ns});
          // Its keys, one message at a time from the sender's thread.
          double t = std::max(push, sender_free[wi]);
          for (const Key& key : plan.keys) {
            const int id = static_cast<int>(&key - plan.keys.data());
            const double s1 = net.push(w, t, key.bytes);
            const auto& group = source.groups[static_cast<size_t>(key.group)];
            out.calls[wi].push_back(
                {w, group.names[static_cast<size_t>(key.flat - source.flat(key.group, 0))], "push", key.bytes, t, s1});
            serve(id, w, s1);
            t = s1;
          }
          sender_free[wi] = t;
          mine.push_back(t);
          free[l] = push;
        }
        // The rest of the source's iteration after its last update (the learners' wait for one
        // another, the loop).
        double tail = static_cast<double>(si.span_ns);
        for (const auto& u : si.updates) tail = std::min(tail, static_cast<double>(si.span_ns - u.end_ns));
        const double end = *std::max_element(free.begin(), free.end()) + std::max(0.0, tail);
        it.span_ns = end - it.start_ns;
        end_of[wi] = end;
        for (auto& c : compute) {
          c.first -= it.start_ns;
          c.second -= it.start_ns;
        }
        out.every[j][wi] = std::move(it);
        out.compute[j][wi] = std::move(compute);
      }
    }
    return out;
  };
  return settle_walks(walk, ws, 0);
}

std::string ps_mode_assumption(const Knobs& k) {
  switch (k.ps_mode) {
    case vocabulary::PsMode::sync:
      return "sync: a key is updated once every worker's push of it is in, and answered to every worker; the workers "
             "agree at each iteration's start to go on";
    case vocabulary::PsMode::async:
      return "async: every push is applied as it comes in and answered to its worker; no worker waits for another";
    case vocabulary::PsMode::bounded:
      return fmt::format(
          "bounded: every push is applied as it comes in; the answer to a worker is held while it is more than {} "
          "push{} of the key ahead of the slowest worker",
          k.staleness, k.staleness == 1 ? "" : "es");
    case vocabulary::PsMode::eager:
      return "eager: every push is applied as it comes in and its new value sent to every worker at once; a forward "
             "waits only for the value answering the worker's push before last";
  }
  return "";
}

}  // namespace

Projection project(const SourceRun& source, const LinkModel& link, const Knobs& k) {
  if (k.ranks < 2) throw std::invalid_argument("a projection needs 2 ranks or more");
  if (!(k.bucket_mb > 0) || !(k.partition_mb > 0) || !(k.chunk_mb > 0))
    throw std::invalid_argument("bucket, partition and chunk sizes must be positive");
  if (source.iterations.empty()) throw std::invalid_argument("the source run has no timed iterations");
  if (source.learners > 0 && (k.strategy != Strategy::ps || k.ps_mode == vocabulary::PsMode::sync ||
                              k.ps_mode == vocabulary::PsMode::bounded)) {
    throw std::invalid_argument(
        "the source's actor-learners push to a parameter server asynchronously: project it with --strategy ps "
        "--ps-mode async or eager, as run takes it");
  }
  Projection pr;
  pr.knobs = k;
  pr.link = link;
  pr.assumptions.push_back(k.cores_per_rank > 0
                               ? "every rank computes as the source run did (its threads, its cores)"
                               : "every rank computes as the source run did, with a core more for its communication "
                                 "thread: communication takes nothing from compute (--cores-per-rank says otherwise)");
  pr.assumptions.push_back("the link: " + link.source);
  if (k.cores_per_rank > 0) {
    const int64_t computing = source.learners > 0 ? source.learners : source.run.threads;
    pr.assumptions.push_back(fmt::format(
        "each rank has {:g} core{} for its {} compute thread{} and its communication thread, shared while both run",
        k.cores_per_rank, k.cores_per_rank == 1 ? "" : "s", computing, computing == 1 ? "" : "s"));
  }
  if (source.memory_gbps > 0) {
    pr.assumptions.push_back(fmt::format(
        "copies into and out of buckets run at the source's memory-bound rate, {:.1f} GB/s", source.memory_gbps));
  } else {
    pr.assumptions.push_back("the source has no roofline: copies are taken as free");
  }
  if (k.strategy == Strategy::allreduce) {
    const auto plans = plan_groups(source, k, pr.bucket_bytes);
    Cores cores{static_cast<double>(std::max<int64_t>(1, source.run.threads)),
                k.cores_per_rank > 0 ? k.cores_per_rank : static_cast<double>(source.run.threads + 1)};
    cores.like_sweep = source.run.threads == 1 && link.sweep_cores_per_rank > 0 &&
                       std::abs(cores.cores - link.sweep_cores_per_rank) < 1e-9;
    std::vector<double> starts(static_cast<size_t>(k.ranks), 0.0);
    const size_t count = source.iterations.size();
    std::vector<std::vector<ProjectedIteration>> by_rank(static_cast<size_t>(k.ranks));
    const std::string no_cross = k.priority && k.cross_barrier ? why_no_cross_barrier(source) : "";
    pr.knobs.cross_barrier = k.priority && k.cross_barrier && no_cross.empty();
    if (pr.knobs.cross_barrier) {
      pr.iterations = cross_barrier_iterations(source, plans.front(), link, k, cores);
      pr.assumptions.push_back(
          "cross-barrier: the backward's end does not wait; the next forward waits, layer by layer, for its "
          "parameters' buckets and updates them itself (the source's optimizer time per byte), the next backward "
          "for the rest");
    } else if (k.priority && k.cross_barrier) {
      pr.assumptions.push_back("no cross-barrier updates (" + no_cross +
                               "): the backward's end waits for every bucket");
    }
    for (size_t j = 0; j < count && !pr.knobs.cross_barrier; ++j) {
      std::vector<const SourceIteration*> sources;
      for (int64_t r = 0; r < k.ranks; ++r) sources.push_back(&source.iterations[source_index(source, k, j, r)]);
      auto its = allreduce_iteration(source, sources, starts, plans, link, k, cores);
      for (size_t r = 0; r < its.size(); ++r) {
        starts[r] = its[r].start_ns + its[r].span_ns;
        by_rank[r].push_back(std::move(its[r]));
      }
    }
    for (auto& rank : by_rank) {
      for (auto& it : rank) pr.iterations.push_back(std::move(it));
    }
    if (count > 1 && source.shard_ranks == k.ranks) {
      pr.assumptions.push_back(
          fmt::format("every rank's batches are like those of the source, which read rank {}'s shard of {} (--shard)",
                      source.shard_rank, source.shard_ranks));
    } else if (count > 1) {
      pr.assumptions.push_back(fmt::format(
          "the ranks read shards of their own, which the source (the whole data set) did not: rank r's iteration j "
          "replays the source's iteration (j x {} + r) mod {}; where batches vary (sentence lengths) a source run "
          "with --shard 0/{} replays rank 0's own",
          k.ranks, count, k.ranks));
    }
    if (k.priority && !k.cross_barrier) {
      pr.assumptions.push_back("priority without cross-barrier (--no-cross-barrier): the backward's end waits for "
                               "every bucket");
    }
  } else {
    if (k.ps_priority) throw std::invalid_argument("a parameter server's priority is not modelled yet");
    if (k.staleness < 0) throw std::invalid_argument("a staleness bound must be 0 or more");
    pr.iterations = source.learners > 0 ? learner_iterations(source, link, k, pr.bucket_bytes)
                                        : ps_iterations(source, link, k, pr.bucket_bytes);
    std::stable_sort(pr.iterations.begin(), pr.iterations.end(),
                     [](const ProjectedIteration& a, const ProjectedIteration& b) { return a.rank < b.rank; });
    pr.assumptions.push_back(
        "parameter server: one server shard, a thread of worker 0 (co-located), each worker on a host of its own; its "
        "one receiving thread takes one push at a time; the server's update costs the source's optimizer time per "
        "byte, its threads' CPU work slows worker 0's compute where the ranks have no core to spare");
    pr.assumptions.push_back(ps_mode_assumption(k));
    if (source.learners > 0) {
      pr.assumptions.push_back(fmt::format(
          "{} actor-learners on each rank take the source's updates as they are free, each computing as in the source "
          "less its local step, then pushing its gradients whole (at most two updates waiting to be sent); their reads "
          "take the newest values and never wait",
          source.learners));
    }
  }
  pr.median_span_ns = pr.median(&ProjectedIteration::span_ns, 0);
  return pr;
}

}  // namespace ts::projection
