#include "collectors/environment.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace ts::collectors {
namespace {

TEST(Environment, SnapshotHasEveryKeyOnce) {
  const auto entries = snapshot();
  std::map<std::string, std::string> kv;
  for (const auto& e : entries) {
    EXPECT_TRUE(kv.emplace(e.key, e.value).second) << "duplicate key " << e.key;
    EXPECT_FALSE(e.value.empty()) << e.key;
  }
  for (const char* key :
       {"cpu.model", "cpu.kind", "cpu.logical_cores", "cpu.physical_cores", "cpu.isa", "memory.total_bytes", "os.name",
        "os.kernel", "host.name", "compiler", "build.type", "trainscope.version", "git.revision", "lib.onednn",
        "lib.sqlite", "lib.openmp", "omp.max_threads"}) {
    EXPECT_EQ(kv.count(key), 1u) << key;
  }
  EXPECT_GT(std::stoll(kv["cpu.logical_cores"]), 0);
  EXPECT_GT(std::stoll(kv["memory.total_bytes"]), 0);
  EXPECT_GT(std::stoll(kv["omp.max_threads"]), 0);
  EXPECT_EQ(kv["trainscope.version"].find_first_not_of("0123456789."), std::string::npos);
  EXPECT_EQ(kv["lib.sqlite"].substr(0, 2), "3.");
  EXPECT_NE(kv["lib.onednn"], "unknown");
  EXPECT_NE(kv["compiler"], "unknown");
  EXPECT_NE(kv["os.kernel"], "unknown");
  EXPECT_NE(kv["cpu.kind"].find(" family "), std::string::npos) << kv["cpu.kind"];
}

}  // namespace
}  // namespace ts::collectors
