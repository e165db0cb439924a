// Interference end to end (issue 41, item 3): a real 2-rank CPU run, whose `show --json` gives each
// rank's compute slowed by communication beside it and the run's, consistent with the breakdown
// it sits beside, and whose `show` prints it with what it means.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/cli/cli_test_util.h"

namespace {

using ts::testing::run_trainscope;
using ts::testing::TempDir;

// What every interference row (a rank's or the run's) must satisfy.
void expect_consistent(const nlohmann::json& f, const std::string& who) {
  SCOPED_TRACE(who);
  for (const char* key : {"compute_ms", "disturbed_ms", "covered_ms", "unmeasured_ms", "interference_ms", "jitter_ms",
                          "thin_ms", "share"}) {
    ASSERT_TRUE(f.contains(key) && f[key].is_number()) << key << " in " << f.dump();
    EXPECT_GE(f[key].get<double>(), 0.0) << key;
  }
  const double eps = 1e-9;
  const double compute = f["compute_ms"].get<double>(), disturbed = f["disturbed_ms"].get<double>(),
               covered = f["covered_ms"].get<double>(), interference = f["interference_ms"].get<double>();
  EXPECT_LE(interference, covered + eps) << "an instance's excess is capped by its own time under comm";
  EXPECT_LE(covered, disturbed + eps);
  EXPECT_LE(disturbed, compute + eps);
  EXPECT_NEAR(f["unmeasured_ms"].get<double>(), disturbed - covered, 1e-6);
  EXPECT_LE(f["thin_ms"].get<double>(), covered + eps);
  EXPECT_LE(f["share"].get<double>(), 1.0);
  if (!f["covered_share"].is_null()) {
    EXPECT_GE(f["covered_share"].get<double>(), 0.0);
    EXPECT_LE(f["covered_share"].get<double>(), 1.0);
  } else {
    EXPECT_EQ(disturbed, 0.0) << "no covered share only when nothing was disturbed";
  }
  EXPECT_LE(f["covered_instances"].get<int64_t>(), f["disturbed_instances"].get<int64_t>());
  EXPECT_LE(f["disturbed_instances"].get<int64_t>(), f["instances"].get<int64_t>());
}

TEST(InterferenceRun, TwoRanksShowEachRanksInterferenceBesideTheBreakdown) {
  ASSERT_EQ(std::system("command -v mpirun > /dev/null 2>&1"), 0)
      << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  const auto db = dir / "i.db";
  // Small buckets: the all-reduce runs during backward, beside the training thread's ops.
  const auto res = run_trainscope("run resnet50 --preset tiny --nproc 2 --threads 1 --iters 12 --warmup 1 "
                                  "--bucket-mb 0.05 --eval-batches 0 --db " +
                                  db.string() + " 2>&1");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("interference"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("part of compute"), std::string::npos) << res.out;

  const auto shown = run_trainscope("show 1 --json --db " + db.string());
  ASSERT_EQ(shown.exit_code, 0) << shown.out;
  const auto j = nlohmann::json::parse(shown.out);
  const auto& d = j["distributed"];
  ASSERT_TRUE(d.contains("interference") && d["interference"].is_object()) << d.dump(2);
  const auto& in = d["interference"];
  EXPECT_FALSE(in["meaning"].get<std::string>().empty());
  ASSERT_EQ(in["per_rank"].size(), 2u) << in.dump(2);
  double interference_sum = 0, compute_sum = 0, disturbed_instances = 0;
  for (const auto& r : in["per_rank"]) {
    const int64_t rank = r["rank"].get<int64_t>();
    expect_consistent(r, "rank " + std::to_string(rank));
    EXPECT_GT(r["instances"].get<int64_t>(), 0) << "the training thread's ops of the timed iterations";
    interference_sum += r["interference_ms"].get<double>();
    compute_sum += r["compute_ms"].get<double>();
    disturbed_instances += static_cast<double>(r["disturbed_instances"].get<int64_t>());
    // Beside the breakdown: the same figure in the rank's row.
    bool found = false;
    for (const auto& b : d["per_rank"]) {
      if (b["rank"].get<int64_t>() != rank) continue;
      found = true;
      EXPECT_DOUBLE_EQ(b["interference_ms"].get<double>(), r["interference_ms"].get<double>());
    }
    EXPECT_TRUE(found) << "rank " << rank;
    for (const auto& o : r["top_ops"]) {
      EXPECT_FALSE(o["op"].get<std::string>().empty());
      EXPECT_GT(o["undisturbed"].get<int64_t>(), 0) << "an op with interference has a reference";
      EXPECT_GT(o["interference_ms"].get<double>(), 0.0);
    }
  }
  EXPECT_GT(disturbed_instances, 0) << "the all-reduce of small buckets runs beside backward's ops";
  expect_consistent(in["run"], "run");
  EXPECT_NEAR(in["run"]["interference_ms"].get<double>(), interference_sum / 2, 1e-9);
  EXPECT_NEAR(in["run"]["compute_ms"].get<double>(), compute_sum / 2, 1e-9);

  const auto text = run_trainscope("show 1 --db " + db.string());
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("interference   compute slowed by communication beside it"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("unmeasured"), std::string::npos) << text.out;
}

}  // namespace
