// Schema v14: what trained a run. A run says its framework and keeps it through import; runs
// before v14 are trainscope's, as the migration sets them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "store/import.h"
#include "store/open.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/writer.h"
#include "tests/store/raw_sqlite.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace ts::store;
using ts::store::test_support::Raw;

namespace {

RunInfo run_of(const std::string& framework) {
  RunInfo info;
  info.workload = "resnet50";
  info.preset = "small";
  info.device = "cpu";
  info.batch_size = 16;
  info.started_at = "2026-12-01T00:00:00Z";
  info.framework = framework;
  return info;
}

}  // namespace

TEST(StoreFramework, ARunSaysWhatTrainedItAndImportKeepsIt) {
  ts::testing::ScratchDir dir("ts_framework");
  const fs::path db = dir / "f.db", other = dir / "other.db";
  int64_t pytorch = 0, native = 0;
  {
    Writer w(db);
    native = w.begin_run(run_of("trainscope"));
    pytorch = w.begin_run(run_of("pytorch"));
  }
  Reader r(db);
  EXPECT_EQ(r.run(native)->framework, "trainscope");
  EXPECT_EQ(r.run(pytorch)->framework, "pytorch");
  Writer to(other);
  const int64_t copy = copy_run(r, pytorch, to);
  EXPECT_EQ(Reader(other).run(copy)->framework, "pytorch");
}

TEST(StoreFramework, RunsBeforeVersionFourteenAreTrainscopes) {
  ts::testing::ScratchDir dir("ts_framework");
  const fs::path db = dir / "v13.db";
  ts::store::test_support::write_old_file(db, 13, 1);
  EXPECT_EQ(Reader(db).run(1)->framework, "trainscope") << "read, not migrated";
  {
    Writer w(db);  // migrates
    w.begin_run(run_of("pytorch"));
  }
  Raw raw(db);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM runs WHERE framework = 'trainscope'"), 1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM runs WHERE framework = 'pytorch'"), 1);
}
