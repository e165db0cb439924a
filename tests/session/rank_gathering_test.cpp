// The gathering of a distributed run's records on rank 0 (session/rank_records.h), without
// ranks: what a rank sends at its end, how the other ranks' endings decide the run's verdict,
// and every rank's records written into the one run.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "profiler/gpu_activity.h"
#include "session/rank_records.h"
#include "store/reader.h"
#include "store/writer.h"
#include "tests/support/files.h"

using ts::session::RankPayload;
using ts::session::RankSummary;
using ts::store::RunStatus;
using namespace std::chrono_literals;

namespace {

RankPayload final_from(int64_t rank, std::string error = "") {
  RankPayload p;
  p.rank = rank;
  p.final = true;
  p.error = std::move(error);
  return p;
}

}  // namespace

TEST(RankGathering, EveryRankThatEndedWellLeavesTheVerdict) {
  RunStatus status = RunStatus::interrupted;
  std::string error;
  ts::session::add_rank_verdicts({final_from(1), final_from(2)}, {}, 120s, status, error);
  EXPECT_EQ(status, RunStatus::interrupted);
  EXPECT_TRUE(error.empty());
}

TEST(RankGathering, AMissingOrFailedRankFailsTheRunAndSaysWhich) {
  RunStatus status = RunStatus::completed;
  std::string error = "rank 0's own";
  RankPayload streamed = final_from(3, "not a final message");
  streamed.final = false;
  ts::session::add_rank_verdicts({final_from(1, "out of memory"), streamed}, {2, 4}, 120s, status, error);
  EXPECT_EQ(status, RunStatus::failed);
  EXPECT_EQ(error, "rank 0's own; rank(s) 2, 4 sent no final records within 120 s; rank 1: out of memory");
}

TEST(RankGathering, ARankThatSentNothingAloneFailsTheRun) {
  RunStatus status = RunStatus::completed;
  std::string error;
  ts::session::add_rank_verdicts({final_from(1)}, {3}, 5s, status, error);
  EXPECT_EQ(status, RunStatus::failed);
  EXPECT_EQ(error, "rank(s) 3 sent no final records within 5 s");
}

TEST(RankGathering, ARanksFinalMessageCarriesItsRowsSummariesAndFailure) {
  RankSummary mine;
  mine.metrics.push_back({"events_recorded", 12, "events", -1});
  mine.comm_ops.push_back({});
  ts::store::RunFlush rest;
  rest.iterations.push_back({4, false, 10, 20, 2, 0.5});
  ts::workloads::LoopResult loop;
  const RankPayload p = ts::session::final_payload(3, std::move(mine), std::move(rest), loop, "boom");
  EXPECT_EQ(p.rank, 3);
  EXPECT_TRUE(p.final);
  EXPECT_EQ(p.error, "boom");
  ASSERT_EQ(p.flush.iterations.size(), 1u);
  EXPECT_EQ(p.flush.iterations[0].index, 4);
  EXPECT_EQ(p.comm_ops.size(), 1u);
  // The summaries first, then how many memory changes the ledger logged and how many travel.
  ASSERT_GE(p.metrics.size(), 2u);
  EXPECT_EQ(p.metrics.front().name, "events_recorded");
}

// A rank's GPU trace becomes its breakdown over the iterations rank 0 counts: the warm-up and
// what ran outside any iteration left out, per device and iteration.
TEST(RankGathering, ARanksFinalMessageCarriesItsGpuBreakdownOfTheTimedIterations) {
  using ts::profiler::GpuActivity;
  using ts::profiler::GpuKind;
  const auto act = [](GpuKind kind, int64_t start, int64_t end, int32_t iteration, int16_t device = 0) {
    GpuActivity a;
    a.kind = kind;
    a.start_ns = start;
    a.end_ns = end;
    a.iteration = iteration;
    a.device = device;
    return a;
  };
  ts::profiler::GpuTrace trace;
  trace.activities = {
      act(GpuKind::kernel, 0, 50, 0),        // warm-up
      act(GpuKind::kernel, 60, 70, -1),      // outside any iteration
      act(GpuKind::kernel, 100, 160, 1),     // compute 60
      act(GpuKind::comm, 140, 200, 1),       // comm 60, 20 of it under compute
      act(GpuKind::memcpy, 210, 220, 1),     // a copy of its own
      act(GpuKind::kernel, 300, 330, 2),     // iteration 2: compute only
      act(GpuKind::kernel, 300, 310, 2, 1),  // and on another device
      act(GpuKind::api, 90, 400, 1),         // no device time
  };
  ts::workloads::LoopResult loop;
  for (int64_t i = 0; i < 3; ++i) {
    ts::workloads::IterationResult it;
    it.index = i;
    it.warmup = i == 0;
    loop.iterations.push_back(it);
  }
  const RankPayload p = ts::session::final_payload(1, {}, {}, loop, "", trace);
  ASSERT_EQ(p.gpu_breakdown.size(), 3u);
  const auto& a = p.gpu_breakdown[0];
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.iteration, 1);
  EXPECT_EQ(a.start_ns, 100);
  EXPECT_EQ(a.end_ns, 220);
  EXPECT_EQ(a.compute_ns, 60);
  EXPECT_EQ(a.comm_ns, 60);
  EXPECT_EQ(a.overlap_ns, 20);
  EXPECT_EQ(a.exposed_comm_ns, 40);
  EXPECT_EQ(a.memcpy_ns, 10);
  EXPECT_EQ(a.busy_ns, 110);
  EXPECT_EQ(a.idle_ns, 10);
  EXPECT_EQ(p.gpu_breakdown[1].iteration, 2);
  EXPECT_EQ(p.gpu_breakdown[1].device, 0);
  EXPECT_EQ(p.gpu_breakdown[1].compute_ns, 30);
  EXPECT_EQ(p.gpu_breakdown[2].device, 1);
  // No GPU trace (a CPU run, tracing off): no rows.
  EXPECT_TRUE(ts::session::final_payload(1, {}, {}, loop, "").gpu_breakdown.empty());
}

TEST(RankGathering, EveryRanksRecordsGoIntoTheOneRun) {
  ts::testing::ScratchDir dir("ts_rank_gathering");
  const auto db = dir / "runs.db";
  ts::store::Writer w(db);
  ts::store::RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = "cpu";
  info.ranks = 2;
  const int64_t id = w.begin_run(info);
  RankSummary mine;
  mine.metrics.push_back({"events_recorded", 10, "events", -1});
  RankPayload other = final_from(1);
  other.flush.iterations.push_back({0, false, 10, 20, 2, 0.5});
  other.metrics.push_back({"events_recorded", 8, "events", -1});
  other.memory_peak.push_back({"activations", 4096, 15, 0});
  other.gpu_breakdown.push_back({0, 4, 10, 20, 6, 3, 0, 0, 1, 2, 8, 2});
  ts::session::stamp_rank(other);
  ts::session::write_ranks(w, id, mine, {other});
  ts::store::Reader r(db);
  EXPECT_EQ(r.metrics(id, std::nullopt).size(), 2u);
  EXPECT_EQ(r.metrics(id, 1).size(), 1u);
  EXPECT_EQ(r.iterations(id, 1).size(), 1u);
  EXPECT_EQ(r.memory_peak(id, 1).size(), 1u);
  // The other rank's GPU rows are its own, rank 0's view unchanged.
  const auto gpu = r.gpu_breakdown(id, std::nullopt);
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].rank, 1);
  EXPECT_EQ(gpu[0].exposed_comm_ns, 2);
  EXPECT_TRUE(r.gpu_breakdown(id).empty());
}
