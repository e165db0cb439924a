// The timeline's level of detail (store/timeline.h): summaries keep every lane's time exactly
// (per pixel, at every level), raw windows return exactly the events that overlap them with the
// right depth, an index built in memory answers as the stored one does, and a run written to
// after its final write is not drawn from a stale index.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "store/timeline.h"
#include "store/writer.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::store;

namespace {

// An event as generated: where it was drawn (lane key, depth) and its row.
struct Truth {
  bool gpu = false;
  int64_t rank = 0, thread = 0;
  int depth = 0;
  int64_t start = 0, end = 0;
  std::string name, layer;
};

// A training trace: per rank a training thread (run > iterations > forward/backward > ops, a
// quarter of the ops with two nested children) and a communication thread, a learner thread on
// rank 0, plus a GPU stream.
std::vector<Truth> make_trace(uint32_t seed, int iterations) {
  std::mt19937_64 rng(seed);
  auto between = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<Truth> out;
  const int64_t origin = 1'000'000'000;
  for (int64_t rank = 0; rank < 2; ++rank) {
    int64_t t = origin + between(0, 5000);
    const size_t run_at = out.size();
    out.push_back({false, rank, 0, 0, t, 0, "run", ""});
    for (int i = 0; i < iterations; ++i) {
      const size_t it_at = out.size();
      out.push_back({false, rank, 0, 1, t, 0, "iteration", ""});
      for (const char* phase : {"forward", "backward"}) {
        const size_t ph_at = out.size();
        out.push_back({false, rank, 0, 2, t, 0, phase, ""});
        const int ops = static_cast<int>(between(5, 40));
        for (int k = 0; k < ops; ++k) {
          t += between(0, 20'000);
          const int64_t d = between(1'000, 300'000);
          const std::string layer = "layer" + std::to_string(k % 7);
          out.push_back({false, rank, 0, 3, t, t + d, k % 3 == 0 ? "conv" : "matmul", layer});
          if (k % 4 == 0 && d > 100) {
            out.push_back({false, rank, 0, 4, t, t + d / 3, "pack", layer});
            out.push_back({false, rank, 0, 4, t + d / 2, t + d / 2 + d / 4, "gemm", layer});
          }
          t += d;
        }
        t += between(1, 1000);
        out[ph_at].end = t;
      }
      out[it_at].end = t;
      // The communication thread: a few all-reduces around the end of the iteration.
      int64_t c = t - between(100'000, 400'000);
      for (int k = 0; k < 3; ++k) {
        const int64_t d = between(10'000, 150'000);
        out.push_back({false, rank, 1, 0, c, c + d, "all_reduce", ""});
        c += d + between(0, 50'000);
      }
      t = std::max(t, c) + between(1000, 10'000);
    }
    out[run_at].end = t;
  }
  // A learner thread on rank 0 (as A3C's): phases of its own, no iterations.
  for (int64_t k = 0, l = origin; k < 50; ++k, l += 40'000)
    out.push_back({false, 0, 2, 0, l, l + 30'000, "rollout", ""});
  int64_t g = origin + 50'000;
  for (int k = 0; k < 3000; ++k) {
    g += between(0, 30'000);
    const int64_t d = between(500, 200'000);
    out.push_back({true, 0, 7, 0, g, g + d, k % 2 == 0 ? "sgemm_kernel" : "relu_kernel", "layer1"});
    g += d;
  }
  return out;
}

RunInfo synthetic_run() {
  RunInfo info;
  info.workload = "synthetic";
  info.preset = "tiny";
  info.device = "cpu";
  info.started_at = "2026-11-24T00:00:00Z";
  return info;
}

int64_t write_run(const fs::path& db, const std::vector<Truth>& trace, bool finish) {
  Writer w(db);
  const int64_t run = w.begin_run(synthetic_run());
  std::vector<EventRow> events;
  std::vector<GpuActivityRow> gpu;
  std::vector<CollectiveRow> collectives;
  for (const auto& t : trace) {
    if (t.gpu) {
      GpuActivityRow a;
      a.start_ns = t.start;
      a.end_ns = t.end;
      a.kind = "kernel";
      a.name = t.name;
      a.layer = t.layer;
      a.op = "conv2d";
      a.stream = t.thread;
      gpu.push_back(a);
      continue;
    }
    const std::string kind = t.depth <= 2 && t.thread == 0 ? (t.depth == 0   ? "run"
                                                              : t.depth == 1 ? "iteration"
                                                                             : "phase")
                             : t.thread == 1               ? "comm"
                             : t.thread == 2               ? "phase"
                                                           : "op";
    events.push_back({t.start, t.end, t.name, t.layer, kind, "none", -1, t.thread, t.rank});
    if (kind == "comm") collectives.push_back({t.rank, -1, t.thread, "all_reduce", "bucket 0", 4096, t.start, t.end});
  }
  // Streamed order: an enclosing range is written after what it encloses (it ends later).
  std::stable_sort(events.begin(), events.end(),
                   [](const EventRow& a, const EventRow& b) { return a.end_ns < b.end_ns; });
  w.add_events(run, events);
  w.add_gpu_activities(run, gpu);
  w.add_collectives(run, collectives);
  if (finish) w.finish_run(run, RunStatus::completed, "2026-11-24T00:01:00Z", "");
  return run;
}

struct TimelineStore : ::testing::Test {
  ts::testing::ScratchDir dir{"ts_timeline"};
  fs::path db = dir.path() / "t.db";
  std::vector<Truth> trace = make_trace(7, 160);  // ~36k events: three levels of buckets
};

// The lane a truth event should be drawn in.
int lane_of(const std::vector<TimelineLane>& lanes, const Truth& t) {
  for (const auto& l : lanes)
    if ((l.source == "gpu") == t.gpu && l.rank == t.rank && l.thread == t.thread) return l.lane;
  return -1;
}

int64_t overlap(int64_t s, int64_t e, int64_t from, int64_t to) {
  return std::max<int64_t>(0, std::min(e, to) - std::max(s, from));
}

}  // namespace

TEST_F(TimelineStore, LanesAreTheThreadsAndStreamsWithTheirRolesAndDepths) {
  const int64_t run = write_run(db, trace, true);
  TimelineReader r(db, run);
  EXPECT_TRUE(r.index_stored());
  ASSERT_EQ(r.lanes().size(), 6u);
  EXPECT_EQ(r.lanes()[0].label, "training");
  EXPECT_EQ(r.lanes()[0].depths, 5);
  EXPECT_EQ(r.lanes()[1].label, "communication");
  EXPECT_EQ(r.lanes()[2].label, "learner");
  EXPECT_EQ(r.lanes()[3].rank, 1);
  EXPECT_EQ(r.lanes()[3].label, "training");
  EXPECT_EQ(r.lanes()[5].source, "gpu");
  EXPECT_EQ(r.lanes()[5].thread, 7);
  EXPECT_EQ(r.event_count(), static_cast<int64_t>(trace.size()));
  int64_t first = INT64_MAX, last = 0;
  for (const auto& t : trace) first = std::min(first, t.start), last = std::max(last, t.end);
  EXPECT_EQ(r.start_ns(), first);
  EXPECT_EQ(r.end_ns(), last);
}

// Per lane and pixel: summarised time + the time of the events drawn alone = the time of every
// event underneath, at each level the zoom reaches.
TEST_F(TimelineStore, SummariesKeepEveryLanesTimePerPixelAtEveryLevel) {
  const int64_t run = write_run(db, trace, true);
  TimelineReader r(db, run);
  std::set<int> levels_seen;
  for (int pixels : {40, 150, 600, 2500, 10000, 40000}) {
    const TimelineWindow probe = r.window(r.start_ns(), r.end_ns(), pixels);
    if (probe.level < 0) continue;
    const int64_t w = probe.bucket_ns;
    for (int64_t offset : {int64_t{0}, int64_t{37}}) {  // the whole run, and a window inside it
      const int64_t from = r.start_ns() + offset * w;
      const int count = std::min<int64_t>(pixels, (r.end_ns() - from) / w + 1);
      const TimelineWindow win = r.window(from, from + count * w, count);
      ASSERT_EQ(win.level, probe.level);
      levels_seen.insert(win.level);
      std::map<std::pair<int, int64_t>, int64_t> drawn, truth;
      for (const auto& tile : win.tiles) drawn[{tile.lane, (tile.start_ns - from) / w}] += tile.busy_ns;
      for (const auto& e : win.events)
        for (int64_t p = std::max<int64_t>(0, (e.start_ns - from) / w); p < count && from + p * w < e.end_ns; ++p)
          drawn[{e.lane, p}] += overlap(e.start_ns, e.end_ns, from + p * w, from + (p + 1) * w);
      for (const auto& t : trace)
        for (int64_t p = std::max<int64_t>(0, (t.start - from) / w); p < count && from + p * w < t.end; ++p)
          truth[{lane_of(r.lanes(), t), p}] += overlap(t.start, t.end, from + p * w, from + (p + 1) * w);
      std::erase_if(drawn, [](auto& kv) { return kv.second == 0; });
      std::erase_if(truth, [](auto& kv) { return kv.second == 0; });
      ASSERT_EQ(drawn, truth) << "pixels " << pixels << " level " << win.level << " offset " << offset;
      // A bucket never holds more time than it is wide where a lane's depth has no overlaps.
      for (const auto& tile : win.tiles) EXPECT_LE(tile.busy_ns, w);
    }
  }
  EXPECT_GE(levels_seen.size(), 3u) << "the zooms tried reach too few levels to test the pyramid";
}

TEST_F(TimelineStore, ZoomedInWindowsHoldExactlyTheOverlappingEventsAtTheirDepth) {
  const int64_t run = write_run(db, trace, true);
  TimelineReader r(db, run);
  const int64_t span = r.end_ns() - r.start_ns();
  int raw_windows = 0;
  for (int64_t at : {span / 10, span / 3, span / 2, span - span / 50}) {
    const int64_t from = r.start_ns() + at, to = from + 400'000;
    const TimelineWindow win = r.window(from, to, 1000);
    if (win.level >= 0) continue;
    ++raw_windows;
    std::multiset<std::tuple<int, int, int64_t, int64_t, std::string>> got, want;
    for (const auto& e : win.events) got.insert({e.lane, e.depth, e.start_ns, e.end_ns, e.name});
    for (const auto& t : trace)
      if (t.start <= to && t.end >= from) want.insert({lane_of(r.lanes(), t), t.depth, t.start, t.end, t.name});
    EXPECT_EQ(got, want) << "window at " << at;
  }
  EXPECT_EQ(raw_windows, 4) << "400 us over 1000 pixels should be past level 0";
}

TEST_F(TimelineStore, ARunWithoutAStoredIndexIsDrawnTheSameFromOneBuiltInMemory) {
  const int64_t done = write_run(db, trace, true);
  const int64_t running = write_run(db, trace, false);
  TimelineReader stored(db, done), built(db, running);
  EXPECT_TRUE(stored.index_stored());
  EXPECT_FALSE(built.index_stored());
  EXPECT_EQ(built.event_count(), stored.event_count());
  for (int pixels : {200, 3000, 100000}) {
    const auto a = stored.window(stored.start_ns(), stored.end_ns(), pixels);
    const auto b = built.window(built.start_ns(), built.end_ns(), pixels);
    ASSERT_EQ(a.tiles.size(), b.tiles.size());
    for (size_t i = 0; i < a.tiles.size(); ++i) {
      EXPECT_EQ(
          std::tie(a.tiles[i].lane, a.tiles[i].depth, a.tiles[i].start_ns, a.tiles[i].busy_ns, a.tiles[i].events),
          std::tie(b.tiles[i].lane, b.tiles[i].depth, b.tiles[i].start_ns, b.tiles[i].busy_ns, b.tiles[i].events));
      EXPECT_EQ(a.tiles[i].top_name, b.tiles[i].top_name);
    }
    ASSERT_EQ(a.events.size(), b.events.size());
  }
}

TEST_F(TimelineStore, EventsWrittenAfterTheFinalWriteAreNotHiddenByAStaleIndex) {
  const int64_t run = write_run(db, trace, true);
  int64_t late = 0;
  for (const auto& t : trace) late = std::max(late, t.end);
  {
    Writer w(db);
    w.add_events(run, std::vector<EventRow>{{late + 1000, late + 1010, "late", "", "op", "none", -1, 3, 0}});
  }
  TimelineReader r(db, run);
  EXPECT_FALSE(r.index_stored());
  EXPECT_EQ(r.event_count(), static_cast<int64_t>(trace.size()) + 1);
  EXPECT_EQ(r.lanes().size(), 7u);
}

TEST_F(TimelineStore, DetailsNameTheBytesOfACollectiveAndTheOpThatLaunchedAKernel) {
  const int64_t run = write_run(db, trace, true);
  TimelineReader r(db, run);
  const TimelineWindow win = r.window(r.start_ns(), r.end_ns(), 10'000'000);  // raw: everything
  bool comm = false, kernel = false;
  for (const auto& e : win.events) {
    if (!comm && e.name == "all_reduce") {
      const auto d = r.details(e);
      EXPECT_EQ(d.kind, "comm");
      EXPECT_EQ(d.bytes, 4096);
      EXPECT_EQ(d.detail, "all_reduce bucket 0");
      EXPECT_EQ(d.source_label, "rank " + std::to_string(d.rank) + " · communication (thread 1)");
      comm = true;
    }
    if (!kernel && e.gpu) {
      const auto d = r.details(e);
      EXPECT_EQ(d.kind, "kernel");
      EXPECT_EQ(d.launched_by, "conv2d");
      EXPECT_EQ(d.layer, "layer1");
      EXPECT_EQ(d.source_label, "GPU 0 · stream 7");
      kernel = true;
    }
  }
  EXPECT_TRUE(comm && kernel);
}

TEST_F(TimelineStore, MarksFindEveryEventOfANameOrLayer) {
  const int64_t run = write_run(db, trace, true);
  TimelineReader r(db, run);
  const auto count = [&](auto pred) { return std::count_if(trace.begin(), trace.end(), pred); };
  EXPECT_EQ(static_cast<int64_t>(r.marks("gemm", false).size()),
            count([](const Truth& t) { return t.name == "gemm"; }));
  EXPECT_EQ(static_cast<int64_t>(r.marks("layer1", true).size()),
            count([](const Truth& t) { return t.layer == "layer1"; }));
  EXPECT_TRUE(r.marks("no such op", false).empty());
}

TEST_F(TimelineStore, AnUntracedRunHasAnEmptyTimelineAndAMissingRunIsAnError) {
  Writer w(db);
  const int64_t run = w.begin_run(synthetic_run());
  w.finish_run(run, RunStatus::completed, "2026-11-24T00:01:00Z", "");
  TimelineReader r(db, run);
  EXPECT_TRUE(r.lanes().empty());
  EXPECT_TRUE(r.window(0, 100, 10).tiles.empty());
  EXPECT_THROW(TimelineReader(db, run + 5), StoreError);
}

// Issue 41: rank 1's clock reads 2.5 s (and an odd 37 ns) ahead of rank 0's. Aligned with that
// offset, the skewed run is drawn exactly as the same run on one clock: the extent, zoomed-in
// windows event for event, coarse windows' time per lane and depth, the events drawn alone,
// marks, and a collective's details (looked up on the rank's own clock).
TEST_F(TimelineStore, RanksOnSkewedClocksAreDrawnOnRankZerosOnceAligned) {
  constexpr int64_t kSkew = 2'500'000'037;
  std::vector<Truth> skewed = trace;
  for (auto& t : skewed) {
    if (!t.gpu && t.rank == 1) t.start += kSkew, t.end += kSkew;
  }
  const int64_t one_clock = write_run(db, trace, true), two_clocks = write_run(db, skewed, true);
  TimelineReader a(db, one_clock), b(db, two_clocks);
  const auto some_rank1_comm = [](const TimelineWindow& w) {
    for (const auto& e : w.events)
      if (e.name == "all_reduce" && e.lane == 4) return e;  // rank 1's communication thread
    return TimelineEvent{};
  };
  ASSERT_EQ(b.lanes()[4].rank, 1);
  ASSERT_EQ(b.lanes()[4].label, "communication");
  EXPECT_GT(b.end_ns() - a.end_ns(), kSkew / 2) << "unaligned, rank 1's events end 2.5 s late";

  b.align({{1, ts::vocabulary::clock_model({kSkew, 1000, a.start_ns(), 2000, 32})}});
  EXPECT_EQ(b.start_ns(), a.start_ns());
  EXPECT_EQ(b.end_ns(), a.end_ns());
  const int64_t span = a.end_ns() - a.start_ns();
  for (int64_t at : {span / 10, span / 3, span - span / 50}) {
    const int64_t from = a.start_ns() + at, to = from + 400'000;
    const TimelineWindow wa = a.window(from, to, 1000), wb = b.window(from, to, 1000);
    ASSERT_LT(wa.level, 0);
    std::vector<std::tuple<int, int, int64_t, int64_t, std::string>> ea, eb;
    for (const auto& e : wa.events) ea.emplace_back(e.lane, e.depth, e.start_ns, e.end_ns, e.name);
    for (const auto& e : wb.events) eb.emplace_back(e.lane, e.depth, e.start_ns, e.end_ns, e.name);
    EXPECT_EQ(eb, ea) << "window at " << at;
  }
  // Coarse windows (their index's buckets depend on the run's raw span, so they are compared with
  // the same run unaligned): rank 1's lanes are its own window 2.5 s on, moved back; the others as they were.
  TimelineReader unaligned(db, two_clocks);
  for (int pixels : {50, 200}) {
    const int64_t from = b.start_ns(), to = b.end_ns();
    const TimelineWindow wb = b.window(from, to, pixels), w0 = unaligned.window(from, to, pixels),
                         w1 = unaligned.window(from + kSkew, to + kSkew, pixels);
    ASSERT_GE(wb.level, 0);
    using Tile = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, std::string>;
    std::vector<Tile> got, want;
    for (const auto& t : wb.tiles)
      got.emplace_back(t.lane, t.depth, t.start_ns, t.end_ns, t.events, t.busy_ns, t.top_name);
    for (const auto* w : {&w0, &w1}) {
      const int64_t shift = w == &w1 ? kSkew : 0;
      for (const auto& t : w->tiles)
        if ((b.lanes()[static_cast<size_t>(t.lane)].rank == 1 &&
             b.lanes()[static_cast<size_t>(t.lane)].source == "cpu") == (shift != 0))
          want.emplace_back(t.lane, t.depth, t.start_ns - shift, t.end_ns - shift, t.events, t.busy_ns, t.top_name);
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << pixels << " pixels";
    std::multiset<std::tuple<int, int, int64_t, int64_t>> alone_a, alone_b;
    const TimelineWindow wa = a.window(a.start_ns(), a.end_ns(), 10'000'000);  // raw: everything
    for (const auto& e : wa.events)
      if (e.end_ns - e.start_ns >= wb.bucket_ns) alone_a.insert({e.lane, e.depth, e.start_ns, e.end_ns});
    for (const auto& e : wb.events) alone_b.insert({e.lane, e.depth, e.start_ns, e.end_ns});
    EXPECT_TRUE(std::includes(alone_b.begin(), alone_b.end(), alone_a.begin(), alone_a.end()))
        << "every event longer than a bucket is drawn alone where it was on one clock (" << pixels << " pixels)";
  }
  const auto marks_a = a.marks("gemm", false), marks_b = b.marks("gemm", false);
  ASSERT_EQ(marks_b.size(), marks_a.size());
  for (size_t i = 0; i < marks_a.size(); ++i)
    EXPECT_EQ(std::tie(marks_b[i].lane, marks_b[i].start_ns, marks_b[i].end_ns),
              std::tie(marks_a[i].lane, marks_a[i].start_ns, marks_a[i].end_ns));
  const TimelineEvent comm = some_rank1_comm(b.window(b.start_ns(), b.start_ns() + span / 20, 10'000'000));
  ASSERT_EQ(comm.name, "all_reduce");
  const auto d = b.details(comm);
  EXPECT_EQ(d.bytes, 4096) << "the collective is found on rank 1's own clock";
  EXPECT_EQ(d.event.start_ns, comm.start_ns) << "and the event stays on rank 0's";
}

// Issue 41: a selected collective brings every rank's part of the same call, paired as
// reports/collective_split.h pairs them (the k-th call of iteration, collective and label on each
// rank), on rank 0's clock once aligned, split into waiting for the last rank and moving.
TEST_F(TimelineStore, ASelectedCollectiveBringsEveryRanksPartOfTheSameCall) {
  constexpr int64_t kSkew = 2'500'000'037;  // rank 1's clock is ahead
  const int64_t base = 1'000'000'000;
  // Iteration 3 on each rank (its own clock): a bucket's all-reduce, then two negotiations.
  // Rank 0 reaches the second negotiation at +900 us, rank 1 at +1000 us: rank 0 waits 100 us.
  struct Call {
    int64_t rank;
    std::string label;
    int64_t start_us, end_us;
  };
  const std::vector<Call> calls = {{0, "bucket 0", 0, 300},        {1, "bucket 0", 100, 300},
                                   {0, "negotiation", 400, 450},   {1, "negotiation", 420, 450},
                                   {0, "negotiation", 900, 1'200}, {1, "negotiation", 1'000, 1'200},
                                   {0, "lonely", 1'300, 1'400}};  // rank 1 never made this call
  {
    Writer w(db);
    RunInfo info = synthetic_run();
    info.ranks = 2;
    const int64_t run = w.begin_run(info);
    std::vector<EventRow> events;
    std::vector<CollectiveRow> rows;
    for (const auto& c : calls) {
      const int64_t shift = c.rank == 1 ? kSkew : 0;
      const int64_t s = base + c.start_us * 1000 + shift, e = base + c.end_us * 1000 + shift;
      events.push_back({s, e, "all_reduce", "", "comm", "none", 3, 1, c.rank});
      rows.push_back({c.rank, 3, 1, "all_reduce", c.label, 64, s, e});
    }
    w.add_events(run, events);
    w.add_collectives(run, rows);
    w.finish_run(run, RunStatus::completed, "2026-11-24T00:01:00Z", "");
  }
  const auto find = [](TimelineReader& r, int64_t rank, int64_t start_ns) {
    for (const auto& e : r.window(r.start_ns(), r.end_ns(), 10'000'000).events)
      if (r.lanes()[static_cast<size_t>(e.lane)].rank == rank && e.start_ns == start_ns) return e;
    ADD_FAILURE() << "no event of rank " << rank << " at " << start_ns;
    return TimelineEvent{};
  };
  TimelineReader unaligned(db, 1);
  {
    // Rank 1's second negotiation, unaligned: both parts on their own clocks, no split.
    const auto d = unaligned.details(find(unaligned, 1, base + 1'000'000 + kSkew));
    ASSERT_EQ(d.call.size(), 2u);
    EXPECT_EQ(d.call[0].start_ns, base + 900'000);
    EXPECT_EQ(d.call[1].start_ns, base + 1'000'000 + kSkew);
    EXPECT_EQ(d.call[0].waiting_ns, -1) << "rank 1's clock unknown: nothing to split by";
    EXPECT_EQ(d.call_last_rank, -1);
  }
  TimelineReader r(db, 1);
  r.align({{1, ts::vocabulary::clock_model({kSkew, 1000, base, 2000, 32})}});
  const auto d = r.details(find(r, 1, base + 1'000'000));
  EXPECT_EQ(d.detail, "all_reduce negotiation");
  ASSERT_EQ(d.call.size(), 2u);
  EXPECT_EQ(d.call_last_rank, 1);
  EXPECT_EQ(d.call[0].rank, 0);
  EXPECT_EQ(d.call[0].start_ns, base + 900'000) << "the second negotiation, not the first";
  EXPECT_EQ(d.call[0].waiting_ns, 100'000);
  EXPECT_EQ(d.call[0].moving_ns, 200'000);
  EXPECT_EQ(d.call[1].start_ns, base + 1'000'000);
  EXPECT_EQ(d.call[1].end_ns, base + 1'200'000);
  EXPECT_EQ(d.call[1].waiting_ns, 0);
  EXPECT_EQ(d.call[1].moving_ns, 200'000);
  for (const auto& p : d.call) {
    ASSERT_GE(p.lane, 0);
    EXPECT_EQ(r.lanes()[static_cast<size_t>(p.lane)].rank, p.rank);
    EXPECT_EQ(r.lanes()[static_cast<size_t>(p.lane)].label, "communication");
  }
  // From rank 0's side the same call; rank 0's first negotiation pairs with rank 1's first.
  const auto from0 = r.details(find(r, 0, base + 900'000));
  ASSERT_EQ(from0.call.size(), 2u);
  EXPECT_EQ(from0.call[1].start_ns, base + 1'000'000);
  const auto first = r.details(find(r, 0, base + 400'000));
  ASSERT_EQ(first.call.size(), 2u);
  EXPECT_EQ(first.call[1].start_ns, base + 420'000);
  EXPECT_EQ(first.call[0].waiting_ns, 20'000);
  // A call one rank never made pairs with nothing.
  EXPECT_TRUE(r.details(find(r, 0, base + 1'300'000)).call.empty());
}
