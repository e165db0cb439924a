// Measurement conditions end to end: a run stores what the machine gave it (conditions_*
// metrics), and every view prints the digest's verdict on them. The machine may be idle or busy
// while this runs, so no test expects clean or noisy of a live run: only a verdict that agrees
// with the stored figures.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <map>

#include "cli_test_util.h"
#include "nlohmann/json.hpp"
#include "reports/measurement_conditions.h"
#include "store/reader.h"

using namespace ts;
using namespace ts::testing;

namespace {

struct Stored {
  std::map<std::string, double> value;
  std::map<std::string, std::string> unit;
};

Stored conditions_of(const std::filesystem::path& db, int64_t run) {
  store::Reader r(db);
  Stored s;
  for (const auto& m : r.metrics(run)) {
    if (m.iteration >= 0 || !m.name.starts_with("conditions_")) continue;
    s.value[m.name] = m.value;
    s.unit[m.name] = m.unit;
  }
  return s;
}

nlohmann::json show_json(const std::filesystem::path& db, int64_t run) {
  const auto res = run_trainscope("show " + std::to_string(run) + " --json --db " + db.string());
  EXPECT_EQ(res.exit_code, 0) << res.out;
  return nlohmann::json::parse(res.out, nullptr, false);
}

}  // namespace

TEST(CliConditions, TinyRunStoresConditionsAndShowCarriesTheVerdict) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto run = run_trainscope("run resnet50 --preset tiny --iters 3 --warmup 1 --threads 1 --db " + db.string());
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("  conditions     "), std::string::npos) << run.out;  // the summary after the run

  const Stored s = conditions_of(db, 1);
  for (const char* name :
       {"conditions_window_s", "conditions_threads_asked", "conditions_online_cores", "conditions_process_cores",
        "conditions_cpu_got_of_asked_percent", "conditions_job_processes_on_host"}) {
    EXPECT_TRUE(s.value.contains(name)) << name;
  }
  EXPECT_EQ(s.unit.at("conditions_cpu_got_of_asked_percent"), "%");
  EXPECT_EQ(s.unit.at("conditions_process_cores"), "cores");
  EXPECT_DOUBLE_EQ(s.value.at("conditions_threads_asked"), 1);
  EXPECT_DOUBLE_EQ(s.value.at("conditions_online_cores"), static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_DOUBLE_EQ(s.value.at("conditions_job_processes_on_host"), 1);
  EXPECT_GT(s.value.at("conditions_window_s"), 0);
  EXPECT_NEAR(s.value.at("conditions_cpu_got_of_asked_percent"), 100 * s.value.at("conditions_process_cores"), 1e-9);
  // Where this machine has them: /proc/stat and /proc/loadavg are there on any Linux.
  EXPECT_TRUE(s.value.contains("conditions_other_processes_cores"));
  EXPECT_TRUE(s.value.contains("conditions_steal_percent"));
  EXPECT_TRUE(s.value.contains("conditions_load_average_start"));
  EXPECT_TRUE(s.value.contains("conditions_load_average_end"));
  if (s.value.contains("conditions_other_processes_cores")) {
    EXPECT_GE(s.value.at("conditions_other_processes_cores"), 0);
  }

  // The verdict `show --json` carries is the one the stored figures make, with its reasons.
  const auto j = show_json(db, 1);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("conditions"));
  const auto& c = j["conditions"];
  const reports::Conditions expected = reports::judge_conditions(s.value);
  const std::string verdict = c["verdict"];
  EXPECT_TRUE(verdict == "clean" || verdict == "noisy") << verdict;
  EXPECT_EQ(verdict, expected.label());
  EXPECT_EQ(c["reasons"].size(), expected.reasons.size());
  EXPECT_EQ(verdict == "noisy", !c["reasons"].empty());
  EXPECT_EQ(c["line"].get<std::string>(), expected.verdict_line());
  const bool starved =
      s.value.at("conditions_cpu_got_of_asked_percent") < reports::NoiseThresholds::min_cpu_got_of_asked_percent;
  EXPECT_EQ(starved, c["line"].get<std::string>().find("of the 1 core it asked for") != std::string::npos);
  EXPECT_EQ(j["metrics"]["conditions_cpu_got_of_asked_percent"].get<double>(),
            s.value.at("conditions_cpu_got_of_asked_percent"));

  // `show` and `runs` print the same verdict.
  const auto show = run_trainscope("show 1 --db " + db.string());
  EXPECT_NE(show.out.find("  conditions     " + expected.verdict_line()), std::string::npos) << show.out;
  const auto runs = run_trainscope("runs --db " + db.string());
  EXPECT_NE(runs.out.find(" " + expected.label() + " "), std::string::npos) << runs.out;
}

// A run stored before conditions were recorded: unknown, never clean.
TEST(CliConditions, RunWithoutConditionsIsUnknown) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto run = run_trainscope("run resnet50 --preset tiny --iters 2 --warmup 0 --threads 1 --db " + db.string());
  ASSERT_EQ(run.exit_code, 0) << run.out;
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "DELETE FROM metrics WHERE name LIKE 'conditions_%'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
  const auto j = show_json(db, 1);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["conditions"]["verdict"], "unknown");
  EXPECT_EQ(j["conditions"]["line"], "unknown (not recorded)");
  const auto show = run_trainscope("show 1 --db " + db.string());
  EXPECT_NE(show.out.find("  conditions     unknown (not recorded)"), std::string::npos) << show.out;
  const auto runs = run_trainscope("runs --db " + db.string());
  EXPECT_NE(runs.out.find(" unknown "), std::string::npos) << runs.out;
  EXPECT_EQ(runs.out.find(" clean "), std::string::npos) << runs.out;
}
