// Interference (reports/interference.h; docs/formulas.md, "Interference") on synthetic events of
// known dilation, its edge cases, and the same figures read back from a db through the reader's
// id query and the digest's conversion.
#include "reports/interference.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "reports/run_digest.h"
#include "reports/suite_report.h"
#include "store/reader.h"
#include "store/writer.h"
#include "tests/support/files.h"

namespace {

using ts::reports::EventKindIds;
using ts::reports::rank_interference;
using ts::store::EventIdRow;

constexpr int64_t kMs = 1'000'000;
const EventKindIds kKinds{.op = 1, .comm = 2, .phase = 3};
constexpr int64_t kTrain = 0, kComm = 1;  // threads
constexpr int64_t kConv = 10, kRelu = 11, kLayer = 20, kForward = 30, kBackward = 31;

EventIdRow op(int64_t start_ms, int64_t length_us, int64_t iteration, int64_t name = kConv, int64_t pass = kBackward,
              int64_t thread = kTrain) {
  return {start_ms * kMs, start_ms * kMs + length_us * 1000, name, kLayer, kKinds.op, pass, iteration, thread};
}
EventIdRow comm(int64_t start_us, int64_t end_us, int64_t iteration, int64_t thread = kComm) {
  return {start_us * 1000, end_us * 1000, 40, 41, kKinds.comm, 0, iteration, thread};
}
EventIdRow phase(int64_t start_ms, int64_t end_ms, int64_t iteration, int64_t thread = kTrain) {
  return {start_ms * kMs, end_ms * kMs, 50, 0, kKinds.phase, 0, iteration, thread};
}

// Iterations 0..n-1, 100 ms apart, each a phase [i*100, i*100 + 90) on the training thread.
std::vector<EventIdRow> phases(int n) {
  std::vector<EventIdRow> out;
  for (int i = 0; i < n; ++i) out.push_back(phase(i * 100, i * 100 + 90, i));
  return out;
}

std::set<int64_t> iterations(int from, int to) {
  std::set<int64_t> s;
  for (int i = from; i < to; ++i) s.insert(i);
  return s;
}

// An op 10 ms without communication beside it and 13 ms with it: 3 ms of interference per
// disturbed instance; no jitter (the undisturbed instances are all 10 ms).
TEST(Interference, KnownDilationIsTheExcessOverTheUndisturbedMedian) {
  auto ev = phases(6);
  for (int i = 0; i < 6; ++i) {
    const bool disturbed = i >= 4;
    ev.push_back(op(i * 100, disturbed ? 13'000 : 10'000, i));
    if (disturbed) ev.push_back(comm(i * 100'000 - 1'000, i * 100'000 + 20'000, i));  // covers the whole op
  }
  const auto r = rank_interference(ev, kKinds, iterations(0, 6), 1);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.instances, 6);
  EXPECT_EQ(r.op_ns, (4 * 10 + 2 * 13) * kMs);
  EXPECT_EQ(r.disturbed_instances, 2);
  EXPECT_EQ(r.disturbed_ns, 26 * kMs);
  EXPECT_EQ(r.covered_ns, 26 * kMs);
  EXPECT_EQ(r.unmeasured_ns, 0);
  EXPECT_EQ(r.interference_ns, 6 * kMs);
  EXPECT_EQ(r.jitter_ns, 0);
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].reference_ns, 10 * kMs);
  EXPECT_EQ(r.ops[0].undisturbed, 4);
  EXPECT_EQ(r.ops[0].disturbed, 2);
  // Four undisturbed instances: below kThinReference, so the covered time may be noise.
  EXPECT_EQ(r.thin_ns, 26 * kMs);
  EXPECT_EQ(r.thin_instances, 2);
  ASSERT_TRUE(r.covered_share());
  EXPECT_DOUBLE_EQ(*r.covered_share(), 1.0);
}

// An op that is never without communication beside it has no reference: its time is unmeasured,
// and counts as no interference only because none could be measured (the share says so).
TEST(Interference, OpsWithoutAnUndisturbedInstanceAreUnmeasured) {
  auto ev = phases(4);
  for (int i = 0; i < 4; ++i) {
    ev.push_back(op(i * 100, 10'000, i, kConv, kForward));              // never disturbed
    ev.push_back(op(i * 100 + 20, 7'000, i, kRelu, kBackward));         // always disturbed
    ev.push_back(comm(i * 100'000 + 19'000, i * 100'000 + 30'000, i));  // covers only the relu
  }
  const auto r = rank_interference(ev, kKinds, iterations(0, 4));
  EXPECT_EQ(r.op_ns, 4 * 17 * kMs);
  EXPECT_EQ(r.disturbed_ns, 4 * 7 * kMs);
  EXPECT_EQ(r.covered_ns, 0);
  EXPECT_EQ(r.unmeasured_ns, 4 * 7 * kMs);
  EXPECT_EQ(r.interference_ns, 0);
  ASSERT_EQ(r.ops.size(), 1u);  // only identities with disturbed instances are listed
  EXPECT_EQ(r.ops[0].name, kRelu);
  EXPECT_EQ(r.ops[0].reference_ns, -1);
  ASSERT_TRUE(r.covered_share());
  EXPECT_DOUBLE_EQ(*r.covered_share(), 0.0);
}

// Partial overlap: an instance is disturbed by any time under communication, and its excess is
// capped by that time (communication cannot have slowed it by more than the time it ran beside
// it): 10 ms reference, 13 ms with 1 ms of it under communication -> 1 ms, not 3.
TEST(Interference, PartialOverlapIsCappedByTheTimeUnderCommunication) {
  auto ev = phases(8);
  for (int i = 0; i < 8; ++i) ev.push_back(op(i * 100, i < 6 ? 10'000 : 13'000, i));
  ev.push_back(comm(6 * 100'000 + 12'000, 6 * 100'000 + 40'000, 6));  // the last 1 ms of iteration 6's op
  ev.push_back(comm(7 * 100'000 - 5'000, 7 * 100'000 + 4'000, 7));    // the first 4 ms of iteration 7's
  const auto r = rank_interference(ev, kKinds, iterations(0, 8));
  EXPECT_EQ(r.disturbed_instances, 2);
  EXPECT_EQ(r.interference_ns, (1 + 3) * kMs);
  EXPECT_EQ(r.thin_ns, 0) << "six undisturbed instances: enough";
}

// Timing noise: undisturbed 9, 10, 11 ms (the median 10, an instance exceeding it by 1/3 ms on
// average), a disturbed 13 ms: 3 ms of interference and 1/3 ms of it what jitter alone would give.
// A disturbed instance faster than the reference counts nothing (never negative).
TEST(Interference, JitterIsWhatUndisturbedInstancesExceedTheirMedianBy) {
  auto ev = phases(5);
  const int64_t lengths[] = {9'000, 10'000, 11'000, 13'000, 8'000};
  for (int i = 0; i < 5; ++i) ev.push_back(op(i * 100, lengths[i], i));
  ev.push_back(comm(3 * 100'000, 3 * 100'000 + 50'000, 3));
  ev.push_back(comm(4 * 100'000, 4 * 100'000 + 50'000, 4));
  const auto r = rank_interference(ev, kKinds, iterations(0, 5));
  EXPECT_EQ(r.interference_ns, 3 * kMs);
  EXPECT_EQ(r.jitter_ns, 2 * (kMs / 3));
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].reference_ns, 10 * kMs);
}

// Self time: a parent's excess is its own part's, its children's dilation is theirs; a child under
// communication does not disturb its parent's own part unless that part is under it too.
TEST(Interference, NestedOpsCountTheirSelfTime) {
  auto ev = phases(6);
  for (int i = 0; i < 6; ++i) {
    const bool disturbed = i >= 3;
    // parent [0, 4 + child) with a child of 5 ms (8 ms disturbed) starting at 2 ms.
    const int64_t child = disturbed ? 8'000 : 5'000;
    ev.push_back({i * 100 * kMs, i * 100 * kMs + (4'000 + child) * 1000, kRelu, kLayer, kKinds.op, kBackward, i, 0});
    ev.push_back(
        {i * 100 * kMs + 2 * kMs, i * 100 * kMs + 2 * kMs + child * 1000, kConv, kLayer, kKinds.op, kBackward, i, 0});
    if (disturbed) ev.push_back(comm(i * 100'000 + 2'000, i * 100'000 + 2'000 + child, i));  // the child's time only
  }
  const auto r = rank_interference(ev, kKinds, iterations(0, 6));
  EXPECT_EQ(r.op_ns, 6 * 4 * kMs + 3 * 5 * kMs + 3 * 8 * kMs) << "self times add up to the outermost ops' time";
  EXPECT_EQ(r.disturbed_instances, 3) << "the parents' own parts ran with no communication beside them";
  EXPECT_EQ(r.interference_ns, 3 * 3 * kMs);
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].name, kConv);
}

// The same op called several times an iteration (an optimizer's step over each parameter, a
// layer's reorders) is one identity per call: the k-th call is set against the k-th calls of the
// other iterations, not against a median of every size. Here the second call is always 10 ms,
// the first 1 ms: under communication the second is not slower, and nothing is interference.
TEST(Interference, EachCallOfAnIterationIsItsOwnIdentity) {
  auto ev = phases(10);
  for (int i = 0; i < 10; ++i) {
    ev.push_back({i * 100 * kMs, i * 100 * kMs + kMs, kConv, 0, kKinds.op, 0, i, 0});
    ev.push_back({i * 100 * kMs + 5 * kMs, i * 100 * kMs + 15 * kMs, kConv, 0, kKinds.op, 0, i, 0});
    ev.push_back({i * 100 * kMs + 20 * kMs, i * 100 * kMs + 21 * kMs, kConv, 0, kKinds.op, 0, i, 0});
  }
  for (int i = 7; i < 10; ++i) ev.push_back(comm(i * 100'000 + 4'000, i * 100'000 + 16'000, i));
  const auto r = rank_interference(ev, kKinds, iterations(0, 10));
  EXPECT_EQ(r.disturbed_instances, 3);
  EXPECT_EQ(r.interference_ns, 0) << "against a median of every call's 1, 10 and 1 ms it would be 3 x 9 ms";
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].call, 1);
  EXPECT_EQ(r.ops[0].calls, 3);
  EXPECT_EQ(r.ops[0].reference_ns, 10 * kMs);
}

// What is counted: ops of the timed iterations on threads with phases, against communication on
// other threads. A collective on the op's own thread is not beside it; a communication thread's
// ops are not compute; warm-up instances neither count nor give the reference.
TEST(Interference, CountsTimedOpsOfTrainingThreadsAgainstOtherThreadsComm) {
  auto ev = phases(7);
  for (int i = 0; i < 7; ++i) ev.push_back(op(i * 100, i == 0 ? 50'000 : 10'000, i));
  // The training thread's own collective over iteration 1's op: not interference.
  ev.push_back(comm(100'000, 120'000, 1, kTrain));
  // An op on the communication thread (no phases there), under its own collective.
  ev.push_back(op(150, 5'000, 1, kRelu, kBackward, kComm));
  ev.push_back(comm(150'000, 160'000, 1));
  const auto r = rank_interference(ev, kKinds, iterations(1, 7));
  EXPECT_EQ(r.instances, 6);
  EXPECT_EQ(r.op_ns, 6 * 10 * kMs);
  EXPECT_EQ(r.disturbed_instances, 0);
  EXPECT_FALSE(r.covered_share()) << "nothing disturbed: no share to give";
  EXPECT_TRUE(r.ops.empty());
}

// Another rank's communication on the same machine is beside the op too (it shares the cores),
// on rank 0's clock: the rank's own times are mapped onto it before they are set against it.
TEST(Interference, OtherRanksCommunicationOnTheMachineIsBesideOnRankZerosClock) {
  auto ev = phases(6);
  for (int i = 0; i < 6; ++i) ev.push_back(op(i * 100, i >= 4 ? 12'000 : 10'000, i));
  // Rank 1's clock is 1 s ahead of rank 0's: its op at its 400 ms is at rank 0's -600 ms.
  ts::store::RankClockRow start{1, "start", 1'000 * kMs, 1'000, 0, 2'000, 32};
  ts::store::RankClockRow end{1, "end", 1'000 * kMs, 1'000, 10'000 * kMs, 2'000, 32};
  const std::vector<ts::store::RankClockRow> rows{start, end};
  const ts::reports::RankClocks clocks(rows);
  ASSERT_EQ(clocks.to_rank0(1, 400 * kMs), -600 * kMs);
  // Another rank's collectives over iterations 4 and 5's ops, on rank 0's clock.
  const std::vector<ts::reports::CommSpan> others{{-600 * kMs, -580 * kMs}, {-500 * kMs, -480 * kMs}};
  const auto r = rank_interference(ev, kKinds, iterations(0, 6), 1, others, &clocks);
  EXPECT_EQ(r.disturbed_instances, 2);
  EXPECT_EQ(r.interference_ns, 2 * 2 * kMs);
  // Unmapped (the rank's own clock taken for rank 0's), they are beside nothing.
  const auto unmapped = rank_interference(ev, kKinds, iterations(0, 6), 1, others, nullptr);
  EXPECT_EQ(unmapped.disturbed_instances, 0);
  EXPECT_EQ(unmapped.interference_ns, 0);
}

// Stored and read back: the reader's id query gives the same events (kinds filtered, ids
// consistent), and the digest's figures per timed iteration name the ops.
TEST(Interference, ReadFromAStoredRunPerRankAndForTheRun) {
  ts::testing::ScratchDir dir("interference");
  const auto db = dir / "i.db";
  int64_t run = 0;
  {
    ts::store::Writer w(db);
    ts::store::RunInfo info;
    info.workload = "resnet50";
    info.preset = "tiny";
    info.device = "cpu";
    info.ranks = 2;
    run = w.begin_run(info);
    std::vector<ts::store::EventRow> rows;
    for (int64_t rank = 0; rank < 2; ++rank) {
      for (int i = 0; i < 8; ++i) {
        const int64_t t = i * 100 * kMs;
        rows.push_back({t, t + 90 * kMs, "backward", "", "phase", "none", i, 0, rank});
        const bool disturbed = i >= 6;
        // Rank 1's op is dilated 2 ms under comm, rank 0's 1 ms.
        // Rank 0's op in iteration 5 is 1 ms slower, beside rank 1's collective alone.
        const int64_t length = 10 + (disturbed ? rank + 1 : 0) + (rank == 0 && i == 5 ? 1 : 0);
        rows.push_back({t, t + length * kMs, "conv2d", "layer1.0.conv1", "op", "backward", i, 0, rank});
        if (rank == 1 && i == 5)
          rows.push_back({t, t + 30 * kMs, "all_reduce", "bucket 0.1", "comm", "none", i, 1, rank});
        rows.push_back({t + kMs, t + 2 * kMs, "add", "layer1.0", "marker", "none", i, 0, rank});  // not read
        if (disturbed) rows.push_back({t, t + 30 * kMs, "all_reduce", "bucket 0.0", "comm", "none", i, 1, rank});
      }
    }
    w.add_events(run, rows);
    std::vector<ts::store::IterationRow> its;
    for (int64_t rank = 0; rank < 2; ++rank) {
      for (int i = 0; i < 8; ++i) its.push_back({i, i == 0, i * 100 * kMs, i * 100 * kMs + 95 * kMs, 4, 1.0, rank});
    }
    w.add_iterations(run, its);
    w.finish_run(run, ts::store::RunStatus::completed, "2026-11-28T00:00:00Z", "");
  }
  ts::store::Reader reader(db);
  const auto ids = reader.event_ids(run, 1, {"op", "comm", "phase", "no such kind"});
  EXPECT_EQ(ids.size(), 8u + 8u + 3u);
  EXPECT_TRUE(reader.event_ids(run, 1, {"no such kind"}).empty());
  ASSERT_TRUE(reader.string_id("conv2d"));
  EXPECT_EQ(reader.strings({*reader.string_id("conv2d")}).at(*reader.string_id("conv2d")), "conv2d");

  // Iteration 0: warm-up. No hosts known: each rank's own communication alone.
  const auto ranks = ts::reports::read_interference(reader, run, iterations(1, 8), {}, {});
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].interference_ns, 2 * kMs);
  EXPECT_EQ(ranks[1].interference_ns, 4 * kMs);

  std::vector<int64_t> wanted;
  for (const auto& r : ranks) wanted.insert(wanted.end(), {r.ops[0].name, r.ops[0].layer, r.ops[0].pass});
  const auto figures = ts::reports::interference_figures(ranks, 7, reader.strings(wanted));
  ASSERT_EQ(figures.size(), 3u);
  EXPECT_EQ(figures[1].rank, 1);
  EXPECT_NEAR(figures[1].interference_ms, 4.0 / 7, 1e-12);
  EXPECT_NEAR(figures[1].compute_ms, (7 * 10 + 2 * 2) / 7.0, 1e-12);
  ASSERT_EQ(figures[1].top.size(), 1u);
  EXPECT_EQ(figures[1].top[0].op, "conv2d layer1.0.conv1 (backward)");
  EXPECT_NEAR(figures[1].top[0].reference_ms, 10.0, 1e-12);
  EXPECT_EQ(figures[2].rank, -1);  // the run: a rank's mean per timed iteration
  EXPECT_NEAR(figures[2].interference_ms, 6.0 / 14, 1e-12);
  EXPECT_NEAR(figures[2].share, 6.0 / (73 + 74), 1e-12);
  ASSERT_TRUE(figures[2].covered_share);
  EXPECT_DOUBLE_EQ(*figures[2].covered_share, 1.0);

  // On one host, each rank's ops are beside the other's collectives too: rank 0's iteration 5,
  // 1 ms slower beside rank 1's, is interference, no longer part of its reference; on two hosts, not.
  const auto one_host = ts::reports::read_interference(reader, run, iterations(1, 8), {}, {"h", "h"});
  ASSERT_EQ(one_host.size(), 2u);
  EXPECT_EQ(one_host[0].disturbed_instances, 3);
  EXPECT_EQ(one_host[0].interference_ns, 3 * kMs);
  EXPECT_EQ(one_host[1].interference_ns, 4 * kMs);
  const auto two_hosts = ts::reports::read_interference(reader, run, iterations(1, 8), {}, {"h1", "h2"});
  ASSERT_EQ(two_hosts.size(), 2u);
  EXPECT_EQ(two_hosts[0].disturbed_instances, 2);
  EXPECT_EQ(two_hosts[0].interference_ns, 2 * kMs);

  // The digest computes the same for a distributed CPU run (iteration 0 is its warm-up).
  const auto digest = ts::reports::digest_run(reader, db, *reader.run(run), {});
  ASSERT_EQ(digest.interference.size(), 3u);
  EXPECT_NEAR(digest.interference[1].interference_ms, 4.0 / 7, 1e-12);
  EXPECT_EQ(digest.interference[1].top.at(0).op, "conv2d layer1.0.conv1 (backward)");
  EXPECT_NEAR(digest.interference[2].interference_ms, 6.0 / 14, 1e-12);
}

// The suite report's breakdown table gives each rank's interference beside its breakdown ("-"
// for a rank not measured), and its JSON too; a run without any keeps the table as it was.
const ts::reports::Table* breakdown_table(const ts::reports::Section& s) {
  for (const auto& b : s.blocks) {
    if (const auto* t = std::get_if<ts::reports::Table>(&b); t && t->caption.starts_with("Time breakdown per rank"))
      return t;
  }
  for (const auto& sub : s.subsections) {
    if (const auto* t = breakdown_table(sub)) return t;
  }
  return nullptr;
}

TEST(Interference, SuiteReportShowsItBesideTheBreakdown) {
  ts::reports::RunDigest d;
  d.run.id = 3;
  d.key = {"resnet50", "tiny", "cpu", 4, 2};
  d.status = "completed";
  d.unit = "images/s";
  d.iteration_ms = std::vector<double>(10, 40.0);
  d.throughput_per_iteration = std::vector<double>(10, 100.0);
  d.breakdown = {{0, 40, 15, 20, 4, 16, 2, 10}, {1, 41, 16, 19, 3, 16, 2, 9}};
  const auto table_of = [](const ts::reports::RunDigest& digest) {
    const auto doc = ts::reports::suite_report_document({digest}, "test");
    for (const auto& s : doc.sections) {
      if (const auto* t = breakdown_table(s)) return *t;
    }
    return ts::reports::Table{};
  };
  const auto without = table_of(d);
  ASSERT_EQ(without.header.size(), 7u);
  d.interference.push_back({});
  d.interference.back().rank = 0;
  d.interference.back().interference_ms = 2.5;
  d.interference.push_back({});  // the run's
  const auto with = table_of(d);
  ASSERT_EQ(with.header.size(), 8u);
  EXPECT_EQ(with.header.back(), "interference");
  ASSERT_EQ(with.rows.size(), 2u);
  EXPECT_EQ(with.rows[0].back(), "2.50");
  EXPECT_EQ(with.rows[1].back(), "-");
  const auto j = ts::reports::suite_report_json({d}, "test");
  EXPECT_NE(j.dump().find("\"interference_ms\":2.5"), std::string::npos) << j.dump();
}

}  // namespace
