// What `show` prints of every rank's GPU (issue 40): a run of two ranks whose rank 0 recorded its
// CUPTI trace through the real recorder and whose rank 1 sent its GPU breakdown in its final
// message (encoded, decoded, stamped and written as rank 0 does) prints a row per rank with
// compute, comm, overlap, exposed and idle, names the GPU that computes longest, and says the same
// in JSON. A single process prints its one GPU line as before; a CPU run of two ranks no GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli/summary.h"
#include "cli_test_util.h"
#include "profiler/tracer.h"
#include "session/rank_records.h"
#include "session/record.h"
#include "store/writer.h"

using namespace ts;
using namespace ts::testing;

namespace {

constexpr int64_t kMs = 1'000'000;

// One warm-up and two timed iterations of 50 ms, 100 ms apart.
workloads::LoopResult three_iterations() {
  workloads::LoopResult loop;
  for (int64_t i = 0; i < 3; ++i) {
    workloads::IterationResult it;
    it.index = i;
    it.warmup = i == 0;
    it.start_ns = 100 * kMs * i;
    it.end_ns = it.start_ns + 50 * kMs;
    it.samples = 8;
    loop.iterations.push_back(it);
  }
  return loop;
}

// Rank 0's GPU per iteration: compute [10, 16) ms, communication [14, 18) (2 ms under compute),
// a copy [19, 20): span 10 ms, busy 9, idle 1.
profiler::GpuTrace rank0_trace() {
  auto& tracer = profiler::Tracer::global();
  profiler::GpuTrace trace;
  const auto add = [&](profiler::GpuKind kind, int64_t iteration, int64_t from_ms, int64_t to_ms) {
    profiler::GpuActivity a;
    a.kind = kind;
    a.name = tracer.intern(kind == profiler::GpuKind::memcpy ? "memcpy HtoD" : "implicit_gemm");
    a.iteration = static_cast<int32_t>(iteration);
    a.start_ns = 100 * kMs * iteration + from_ms * kMs;
    a.end_ns = 100 * kMs * iteration + to_ms * kMs;
    trace.activities.push_back(a);
  };
  for (int64_t i = 0; i < 3; ++i) {
    add(profiler::GpuKind::kernel, i, 10, 16);
    add(profiler::GpuKind::comm, i, 14, 18);
    add(profiler::GpuKind::memcpy, i, 19, 20);
  }
  return trace;
}

int64_t begin(store::Writer& w, int64_t ranks, const std::string& device) {
  store::RunInfo info;
  info.workload = "resnet50";
  info.preset = "tiny";
  info.device = device;
  info.batch_size = 8;
  info.ranks = ranks;
  return w.begin_run(info);
}

// Rank 1's final message: its GPU (cuda:1) per timed iteration, span 10 ms, compute 8, comm 4 of
// which 3 under compute, a copy of 0.5: busy 9.5, idle 0.5.
session::RankPayload rank1_final() {
  session::RankPayload p;
  p.rank = 1;
  p.final = true;
  for (int64_t i = 1; i < 3; ++i) {
    store::GpuBreakdownRow g;
    g.device = 1;
    g.iteration = i;
    g.start_ns = 100 * kMs * i + 10 * kMs;
    g.end_ns = g.start_ns + 10 * kMs;
    g.compute_ns = 8 * kMs;
    g.comm_ns = 4 * kMs;
    g.overlap_ns = 3 * kMs;
    g.exposed_comm_ns = 1 * kMs;
    g.memcpy_ns = kMs / 2;
    g.busy_ns = 9 * kMs + kMs / 2;
    g.idle_ns = kMs / 2;
    p.gpu_breakdown.push_back(g);
  }
  return p;
}

// A run of `ranks` recorded as rank 0 records it, with rank 1's final message where there is one.
int64_t record_run(const std::filesystem::path& db, int64_t ranks, bool gpu) {
  store::Writer w(db);
  const int64_t run = begin(w, ranks, gpu ? "cuda" : "cpu");
  session::RunRecorder rec(w, run);
  if (gpu) rec.set_gpu_trace(rank0_trace());
  rec.record(three_iterations(), {}, nullptr, {}, nullptr, session::RecordScope::everything);
  if (ranks > 1) {
    session::RankPayload other = session::from_bytes(session::to_bytes(gpu ? rank1_final() : session::RankPayload{}));
    other.rank = 1;
    other.final = true;
    session::stamp_rank(other);
    session::write_ranks(w, run, {}, {other});
  }
  w.finish_run(run, store::RunStatus::completed, "2026-12-01T00:00:00Z", "");
  return run;
}

}  // namespace

TEST(GpuRanksSummary, EveryRanksGpuIsShownWithItsOverlapAndTheBusiestNamed) {
  TempDir dir;
  const auto db = dir / "ranks.db";
  const int64_t run = record_run(db, 2, true);
  const auto j = cli::run_summary(db, run);
  const std::string shown = cli::format_summary(j);
  EXPECT_NE(
      shown.find("  GPU per rank (ms per timed iteration)\n"
                 "    rank  device    busy     span  compute     comm  overlap  exposed   memcpy   memset     idle\n"
                 "       0  cuda:0   90.0%    10.00     6.00     4.00     2.00     2.00     1.00     0.00     1.00\n"
                 "       1  cuda:1   95.0%    10.00     8.00     4.00     3.00     1.00     0.50     0.00     0.50\n"
                 "  busiest GPU    rank 1 (cuda:1): the most compute per timed iteration\n"),
      std::string::npos)
      << shown;
  EXPECT_EQ(shown.find("  GPU cuda:"), std::string::npos) << shown;  // no single-process line beside the table

  ASSERT_EQ(j["gpu"].size(), 2u);
  EXPECT_EQ(j["gpu"][0]["rank"], 0);
  EXPECT_EQ(j["gpu"][0]["device"], "cuda:0");
  EXPECT_DOUBLE_EQ(j["gpu"][0]["overlap_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["gpu"][0]["exposed_comm_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["gpu"][0]["idle_ms"].get<double>(), 1.0);
  EXPECT_EQ(j["gpu"][1]["rank"], 1);
  EXPECT_EQ(j["gpu"][1]["device"], "cuda:1");
  EXPECT_DOUBLE_EQ(j["gpu"][1]["compute_ms"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(j["gpu"][1]["comm_ms"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(j["gpu"][1]["overlap_ms"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j["gpu"][1]["exposed_comm_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["gpu"][1]["idle_ms"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["gpu"][1]["busy_fraction"].get<double>(), 0.95);
  EXPECT_EQ(j["distributed"]["busiest_gpu"]["rank"], 1);
  EXPECT_EQ(j["distributed"]["busiest_gpu"]["device"], "cuda:1");
}

TEST(GpuRanksSummary, OneProcessPrintsItsGpuLineAsBefore) {
  TempDir dir;
  const auto db = dir / "one.db";
  const int64_t run = record_run(db, 1, true);
  const auto j = cli::run_summary(db, run);
  const std::string shown = cli::format_summary(j);
  EXPECT_NE(shown.find("  GPU cuda:0     busy 90.0% of 10.00 ms per iteration: compute 6.00, comm 4.00 (exposed "
                       "2.00), memcpy 1.00, memset 0.00, idle 1.00 ms\n"),
            std::string::npos)
      << shown;
  EXPECT_EQ(shown.find("GPU per rank"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("busiest GPU"), std::string::npos) << shown;
  ASSERT_EQ(j["gpu"].size(), 1u);
  EXPECT_FALSE(j["gpu"][0].contains("rank"));
  EXPECT_FALSE(j["gpu"][0].contains("overlap_ms"));
  EXPECT_FALSE(j.contains("distributed"));
}

TEST(GpuRanksSummary, ACpuRunOfTwoRanksShowsNoGpu) {
  TempDir dir;
  const auto db = dir / "cpu.db";
  const int64_t run = record_run(db, 2, false);
  const auto j = cli::run_summary(db, run);
  const std::string shown = cli::format_summary(j);
  EXPECT_TRUE(j["gpu"].empty());
  EXPECT_FALSE(j["distributed"].contains("busiest_gpu"));
  EXPECT_EQ(shown.find("GPU"), std::string::npos) << shown;
}

// Each rank's clock against rank 0's (v11), as rank 0 measured it at the start and the end and
// session::clock_rows made it rows: `show` names the offset, the drift and the bound.
TEST(RankClocksSummary, EachRanksClockIsShownWithItsDriftAndBound) {
  TempDir dir;
  const auto db = dir / "clocks.db";
  int64_t run = 0;
  {
    store::Writer w(db);
    run = begin(w, 3, "cpu");
    session::RunRecorder rec(w, run);
    rec.record(three_iterations(), {}, nullptr, {}, nullptr, session::RecordScope::everything);
    // Rank 1 2.5 s ahead and 1 ppm fast; rank 2 3 ms behind, its end unmeasured (no usable ping).
    const std::vector<vocabulary::ClockOffset> start = {
        {0, 0, 0, 0, 0}, {2'500'000'000, 800, 1'000'000'000, 1'600, 32}, {-3'000'000, 1'500, 1'000'000'000, 3'000, 32}};
    const std::vector<vocabulary::ClockOffset> end = {
        {0, 0, 0, 0, 0}, {2'500'001'000, 1'200, 2'000'000'000, 2'400, 32}, {0, 0, 0, 0, 0}};
    // Iterations 1 and 2 (timed): rank 2 arrives 2 ms after the others at every all-reduce (its
    // clock 3 ms behind), all end together 5 ms after rank 0 arrived.
    std::vector<store::CollectiveRow> calls;
    for (int64_t it = 1; it <= 2; ++it) {
      const int64_t t = 100 * kMs * it + 10 * kMs;
      calls.push_back({0, it, 5, "all_reduce", "bucket 0", 4096, t, t + 5 * kMs});
      calls.push_back({1, it, 5, "all_reduce", "bucket 0", 4096, t + 2'500'000'000, t + 2'500'000'000 + 5 * kMs});
      calls.push_back({2, it, 5, "all_reduce", "bucket 0", 4096, t - 3 * kMs + 2 * kMs, t - 3 * kMs + 5 * kMs});
    }
    w.add_collectives(run, calls);
    session::RankSummary mine;
    mine.clocks = session::clock_rows(start, end);
    ASSERT_EQ(mine.clocks.size(), 3u) << "rank 0 is the reference; rank 2's empty end is left out";
    session::write_ranks(w, run, mine, {});
    w.finish_run(run, store::RunStatus::completed, "2026-12-01T00:00:00Z", "");
  }
  const auto j = cli::run_summary(db, run);
  const std::string shown = cli::format_summary(j);
  EXPECT_NE(
      shown.find("  clocks         rank 1 +2.500000 s, drift +1.00 +- 2.00 ppm; rank 2 -0.003000 s, drift +0.00 +- "
                 "0.00 ppm\n"
                 "                 (against rank 0's; the ranks' times are set on its clock, good to 1.5 us)\n"),
      std::string::npos)
      << shown;
  // Rank 1's 1 ppm drift moves its times by nanoseconds here: the split is the arrivals' 2 ms.
  EXPECT_NE(shown.find("  collectives    waiting for the last rank vs moving data (ms per timed iteration, 2 calls "
                       "on rank 0's clock, good to 3.0 us)\n"
                       "    rank  waiting   moving  busbw moving  last in  others waited for it\n"
                       "       0     2.00     3.00    0.002 GB/s        0       0.00\n"
                       "       1     2.00     3.00    0.002 GB/s        0       0.00\n"
                       "       2     0.00     3.00    0.002 GB/s        2       4.00\n"
                       "  straggler      rank 2: last to arrive in 2 of 2 calls; the others waited 4.00 ms per timed "
                       "iteration for it\n"),
            std::string::npos)
      << shown;
  EXPECT_EQ(j["distributed"]["straggler"]["rank"], 2);
  // Each rank moved 2 x 4096 bytes x 4/3 (the all-reduce's bus factor on 3 ranks) in 2 x 3 ms.
  EXPECT_NEAR(j["distributed"]["collectives_split"]["per_rank"][0]["moving_busbw_gbps"].get<double>(),
              2 * 4096.0 * 4 / 3 / (2 * 3e6), 1e-12);
  ASSERT_EQ(j["distributed"]["clocks"].size(), 2u);
  EXPECT_EQ(j["distributed"]["clocks"][0]["rank"], 1);
  EXPECT_EQ(j["distributed"]["clocks"][0]["offset_ns"], 2'500'000'000);
  EXPECT_NEAR(j["distributed"]["clocks"][0]["drift_ppm"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(j["distributed"]["clocks"][0]["drift_uncertainty_ppm"].get<double>(), 2.0, 1e-9);  // 2 us over 1 s
  EXPECT_EQ(j["distributed"]["clocks"][0]["uncertainty_ns"], 1'200);
  EXPECT_EQ(j["distributed"]["clocks"][1]["uncertainty_ns"], 1'500);
}
