// A run never depends on its terminal or its log (issue 39, "A run depends on its terminal"):
// a reader that leaves the pipe, a stderr on a full disk, a closed terminal (SIGHUP). Each ends
// the output or the run in an orderly way, and what was measured is stored.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "cli_test_util.h"
#include "store/reader.h"

using namespace ts;
using namespace ts::testing;

namespace {

const std::string kRun = " run resnet50 --preset tiny --iters 40 --warmup 1 --threads 1 --eval-batches 1 --db ";

// The one run's status in `db` ("" when there is none).
std::string status_of(const std::filesystem::path& db) {
  store::Reader r(db);
  const auto runs = r.runs();
  return runs.size() == 1 ? std::string(store::to_string(runs[0].status)) : "";
}

}  // namespace

// `trainscope run ... | head -1`: the reader leaves after the first line; the run goes on,
// its final write happens, it exits 0 (what it could not print is simply not printed).
TEST(Terminal, AReaderThatLeavesThePipeDoesNotEndTheRun) {
  TempDir dir;
  const auto db = dir / "pipe.db";
  // stderr into the pipe too (the progress lines), and the run's own exit status kept.
  const auto r = run_command("bash -c 'set -o pipefail; " + std::string(TRAINSCOPE_BIN) + kRun + db.string() +
                             " 2>&1 | head -1 >/dev/null; echo \"status=${PIPESTATUS[0]}\"'");
  EXPECT_NE(r.out.find("status=0"), std::string::npos) << r.out;
  EXPECT_EQ(status_of(db), "completed");
}

// stderr (the progress and notices) on a full disk: no abort, the run stored, exit 0.
TEST(Terminal, AFullDiskUnderStderrDoesNotEndTheRun) {
  TempDir dir;
  const auto db = dir / "full.db";
  const auto r =
      run_command(std::string(TRAINSCOPE_BIN) + kRun + db.string() + " 2>/dev/full >/dev/full; echo status=$?");
  EXPECT_NE(r.out.find("status=0"), std::string::npos) << r.out;
  EXPECT_EQ(status_of(db), "completed");
}

// A closed terminal or ssh session (SIGHUP) is taken as SIGTERM: the run stops after its step
// and is stored as interrupted, not lost; exit 130.
TEST(Terminal, SighupStopsTheRunAndItIsStored) {
  TempDir dir;
  const auto db = dir / "hup.db";
  const std::string cmd = std::string(TRAINSCOPE_BIN) +
                          " run resnet50 --preset tiny --iters 100000 --warmup 1 --threads 1 --eval-batches 0 --db " +
                          db.string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Until the run has stored some iterations (at most 60 s).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool streaming = false;
  while (!streaming && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (!std::filesystem::exists(db)) continue;
    try {
      store::Reader r(db);
      const auto runs = r.runs();
      streaming = !runs.empty() && r.iteration_count(runs[0].id) > 2;
    } catch (const std::exception&) {
    }
  }
  ASSERT_TRUE(streaming);
  ::kill(pid, SIGHUP);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(status_of(db), "interrupted");
}
