// What `show` prints of a run's rates and iteration times (issue 38): one unit, the headline's,
// with the sustained rate first and its median per iteration labelled; the other count's rate
// once; the iterations far slower than the rest counted beside the median. Recorded through
// the real recorder, read back through the digest.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/summary.h"
#include "cli_test_util.h"
#include "session/record.h"
#include "store/writer.h"

using namespace ts;
using namespace ts::testing;

namespace {

// A transformer-like run: 30 timed iterations of 100 ms with 8 pairs and 200 tokens each, two of
// them stalled (1 s and 600 ms), after one warm-up.
int64_t record_run(const std::filesystem::path& db) {
  store::Writer w(db);
  store::RunInfo info;
  info.workload = "transformer";
  info.preset = "tiny";
  info.device = "cpu";
  const int64_t run = w.begin_run(info);
  session::RunRecorder rec(w, run);
  workloads::ThroughputUnits units;
  units.samples = "sentence pairs";
  units.tokens = "tokens";
  units.tokens_headline = true;
  rec.set_units(units);
  workloads::LoopResult loop;
  int64_t t = 0;
  for (int64_t i = 0; i < 31; ++i) {
    const int64_t ms = i == 10 ? 1000 : i == 20 ? 600 : 100;
    workloads::IterationResult it;
    it.index = i;
    it.warmup = i == 0;
    it.start_ns = t;
    it.end_ns = t + ms * 1'000'000;
    it.samples = 8;
    it.tokens = 200;
    loop.iterations.push_back(it);
    t = it.end_ns;
  }
  rec.record(loop, {}, nullptr, {}, nullptr, session::RecordScope::everything);
  w.finish_run(run, store::RunStatus::completed, "2026-11-28T00:00:00Z", "");
  return run;
}

}  // namespace

TEST(SummaryFigures, OneUnitTheSustainedRateFirstAndSlowIterationsCounted) {
  TempDir dir;
  const auto db = dir / "figures.db";
  const int64_t run = record_run(db);
  const auto j = cli::run_summary(db, run);
  const std::string shown = cli::format_summary(j);
  // 6000 tokens in 28 x 100 ms + 1 s + 600 ms: 6000 / 4.4 s.
  EXPECT_NE(shown.find("throughput     1363.64 tokens/s sustained over 30 timed iterations (unpadded source + "
                       "target tokens)\n"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("per iteration: median 2000.00 (p10 2000.00, p90 2000.00)\n"), std::string::npos) << shown;
  EXPECT_NE(shown.find("also 54.55 sentence pairs/s sustained\n"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("sentence pairs/s (p10"), std::string::npos) << shown;  // no second per-iteration unit
  EXPECT_NE(shown.find("100.0 ms median; 2 of 30 timed iterations far slower (beyond 100.0 ms, Q3 + 3 IQR; slowest "
                       "1000.0 ms)"),
            std::string::npos)
      << shown;
  EXPECT_EQ(j["throughput"]["unit"], "tokens/s");
  EXPECT_EQ(j["iteration_outliers"]["count"], 2);
}
