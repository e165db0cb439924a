// Every number of `trainscope run` is checked before anything is written (issue 14): integers
// that do not fit are refused by the parser, values out of range by validate(), both with exit 2,
// a message giving the allowed range, and no db. A batch in range that the machine cannot hold
// is the engine's to refuse: the run ends as failed, with the bytes and the tensor, never a signal.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cli_test_util.h"
#include "store/reader.h"

using namespace ts;
using namespace ts::testing;

namespace {

// The machine's own count, never an assumed one: the tests hold on any number of cores.
int64_t online_cores_here() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

struct Refused {
  std::string args;
  std::string says;  // part of the message
};

// Each `run ARGS --db DB` exits 2 (not a signal, not a failed run), says why, and leaves no db.
void expect_refused(const std::vector<Refused>& cases) {
  for (const auto& c : cases) {
    TempDir dir;
    const auto db = dir / "sub" / "t.db";
    const auto res = run_trainscope("run resnet50 " + c.args + " --db " + db.string());
    EXPECT_EQ(res.exit_code, 2) << c.args << "\n" << res.out;
    EXPECT_NE(res.out.find(c.says), std::string::npos) << c.args << ": expected '" << c.says << "' in\n" << res.out;
    EXPECT_FALSE(std::filesystem::exists(dir / "sub")) << c.args << ": a refused run must write nothing";
  }
}

}  // namespace

// The crash of issue 14: a batch of 2^62 wrapped a tensor's element count to a tiny buffer and
// SyntheticImages::make wrote past it (SIGSEGV). It is now out of range, refused before the run.
TEST(CliValidate, BatchBeyondItsRangeIsRefused) {
  expect_refused({
      {"--batch 4611686018427387904", "--batch must be from 1 to 2147483647 (got 4611686018427387904)"},
      {"--batch 2147483648", "--batch must be from 1 to 2147483647"},
      {"--batch 0", "--batch must be from 1 to 2147483647"},
      {"--batch -3", "--batch must be from 1 to 2147483647"},
  });
}

TEST(CliValidate, IterationsAndWarmupBeyondTheirRangesAreRefused) {
  expect_refused({
      {"--iters 0", "--iters must be from 1 to 1000000000"},
      {"--iters 1000000001", "--iters must be from 1 to 1000000000"},
      {"--iters 9223372036854775807", "--iters must be from 1 to 1000000000"},
      {"--warmup -1", "--warmup must be from 0 to 1000000000"},
      {"--warmup 1000000001", "--warmup must be from 0 to 1000000000"},
      // Their sum once overflowed int64.
      {"--iters 9223372036854775807 --warmup 9223372036854775807", "must be from"},
      {"--eval-batches 1000001", "--eval-batches must be from 0 to 1000000"},
      {"--eval-batches -1", "--eval-batches must be from 0 to 1000000"},
  });
}

// Evaluations during training and the time to quality (session/quality_curve.h).
TEST(CliValidate, EvalEveryAndQualityTargetAreChecked) {
  expect_refused({
      {"--eval-every -1", "--eval-every must be from 0 to 1000000000"},
      {"--eval-every 5 --eval-batches 0", "--eval-every needs held-out batches: --eval-batches 1 or more"},
      {"--quality-target 0.5", "--quality-target needs --eval-every"},
      {"--eval-every 5 --quality-target nan", "--quality-target must be a finite number"},
      {"--eval-every 5 --quality-target inf", "--quality-target must be a finite number"},
  });
}

// The largest values of every range pass the range checks: the refusal that comes is the last
// check's (a db path that cannot be created), so nothing is run.
TEST(CliValidate, EdgesOfTheRangesAreAccepted) {
  TempDir dir;
  std::ofstream(dir / "file") << "x";  // a path below a regular file can never be created
  const auto db = dir / "file" / "t.db";
  // The control: one past an edge, with the same db, is refused for its range (ranges come first).
  const auto past = run_trainscope("run resnet50 --iters 1000000001 --db " + db.string());
  ASSERT_EQ(past.exit_code, 2) << past.out;
  ASSERT_NE(past.out.find("--iters must be from"), std::string::npos) << past.out;
  const std::string cores = std::to_string(online_cores_here());
  for (const std::string& args :
       {"--iters 1000000000 --warmup 1000000000 --batch 2147483647 --eval-batches 1000000 --threads " + cores,
        std::string("--iters 1 --warmup 0 --batch 1 --eval-batches 0 --threads 0")}) {
    const auto res = run_trainscope("run resnet50 " + args + " --db " + db.string());
    EXPECT_EQ(res.exit_code, 2) << args << "\n" << res.out;
    EXPECT_EQ(res.out.find("must be from"), std::string::npos) << args << ": an edge value was refused\n" << res.out;
  }
}

// More threads than cores are refused, not capped: OpenMP's spinning barriers made 1000 threads
// on 2 cores a run that never finished. The message says how many cores there are.
TEST(CliValidate, ThreadsAboveTheCoresAreRefusedNamingTheCores) {
  const int64_t cores = online_cores_here();
  const std::string says = "this machine has " + std::to_string(cores) + " CPU cores online";
  expect_refused({
      {"--threads " + std::to_string(cores + 1), says},
      {"--threads 1000", says},
      {"--threads 1099511627776", says},  // once cast to int: 0, "all cores", and nonsense stored
      {"--threads -1", says},
  });
}

// CLI11 alone clamped these to the largest int64 (or wrapped -1 to 2^64-1 for --seed) and ran.
TEST(CliValidate, IntegersBeyondTheirTypeAreRefusedByTheParser) {
  expect_refused({
      {"--batch 99999999999999999999", "out of range"},
      {"--batch -99999999999999999999", "out of range"},
      {"--iters 99999999999999999999", "out of range"},
      {"--warmup 99999999999999999999", "out of range"},
      {"--threads 99999999999999999999", "out of range"},
      {"--eval-batches 99999999999999999999", "out of range"},
      {"--seed 18446744073709551616", "out of range"},
      {"--seed -1", "not a whole non-negative decimal number"},
      {"--batch 0x10", "not a whole decimal number"},
      {"--batch 1e3", "not a whole decimal number"},
  });
  TempDir dir;
  const auto res = run_trainscope("run a3c --learners 99999999999999999999 --db " + (dir / "t.db").string());
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "t.db"));
}

// Numbers are decimal: CLI11 alone read 010 as octal 8.
TEST(CliValidate, LeadingZerosReadAsDecimal) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto res = run_trainscope("run resnet50 --batch 010 --iters 1 --warmup 0 --eval-batches 0 --threads 1 "
                                  "--no-trace --db " +
                                  db.string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  store::Reader r(db);
  const auto run = r.run(1);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->batch_size, 10);
}

// A batch in range whose input alone is larger than the machine (24 TiB here): the engine's checked
// sizes refuse the tensor with the bytes and its shape; the run is stored as failed, exit 1.
TEST(CliValidate, BatchLargerThanTheMachineFailsTheRunCleanly) {
  TempDir dir;
  const auto db = dir / "t.db";
  const auto res = run_trainscope("run resnet50 --batch 2147483647 --iters 1 --warmup 0 --eval-batches 0 --threads 1 "
                                  "--no-trace --db " +
                                  db.string());
  EXPECT_EQ(res.exit_code, 1) << res.out;  // never a signal (128 + n)
  store::Reader r(db);
  const auto run = r.run(1);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status, store::RunStatus::failed);
  for (const std::string part : {"out of memory", "[2147483647, 3, 32, 32]", "26388279054336 bytes", "inputs"}) {
    EXPECT_NE(run->error.find(part), std::string::npos) << "'" << part << "' missing from: " << run->error;
  }
}

// --roofline sets the ops' declared work against the CPU's measured peaks: without per-op events
// there is nothing to set, and a GPU run's kernels are CUPTI's to time.
TEST(CliValidate, RooflineNeedsTracedCpuOps) {
  expect_refused({
      {"--roofline --no-trace", "--roofline sets the ops' work against the machine: it needs per-op events"},
      {"--roofline --device cuda", "--roofline measures the CPU's peaks"},
  });
}

// Run ids are whole decimal numbers from 1 (issue 39): hex, numbers beyond 64 bits (once read as
// the largest id), 0 and negatives are refused with exit 2 by `show` and `export`; so is a
// negative `show --layers`.
TEST(CliValidate, RunIdsOutOfRangeOrNotDecimalAreRefused) {
  TempDir dir;
  const auto db = dir / "ids.db";
  ASSERT_EQ(
      run_trainscope("run resnet50 --preset tiny --iters 1 --warmup 0 --eval-batches 0 --db " + db.string()).exit_code,
      0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"show 0x1", "not a whole decimal number"},
      {"show 99999999999999999999", "out of range"},
      {"show 0", "run ids start at 1"},
      {"show -5", "run ids start at 1"},
      {"show 1 --layers -2", "below 0"},
      {"export 0x1 --chrome " + (dir / "t.json").string(), "not a whole decimal number"}};
  for (const auto& [args, why] : cases) {
    const auto res = run_trainscope(args + " --db " + db.string());
    EXPECT_EQ(res.exit_code, 2) << args << "\n" << res.out;
    EXPECT_NE(res.out.find(why), std::string::npos) << args << "\n" << res.out;
  }
  EXPECT_EQ(run_trainscope("show 1 --layers 3 --db " + db.string()).exit_code, 0);
  EXPECT_EQ(run_trainscope("show +1 --db " + db.string()).exit_code, 0);
}

// Text that would reach JSON (names, paths, the command line) must be UTF-8, and an input file a
// regular file of bounded size (issue 39): a Latin-1 db name, a working directory with such a
// name, a hostfile that is a FIFO (once read for ever) or /dev/zero (once read until memory ran
// out) are refused with exit 2 at once, nothing written.
TEST(CliValidate, TextThatIsNotUtf8AndInputsThatAreNotFilesAreRefused) {
  TempDir dir;
  const std::string latin1 = (dir / "caf\xE9.db").string();
  auto res = run_trainscope("run resnet50 --iters 1 --warmup 0 --eval-batches 0 --db '" + latin1 + "'");
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_NE(res.out.find("is not valid UTF-8"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("caf\\xE9.db"), std::string::npos) << "the bytes shown, escaped: " << res.out;
  EXPECT_FALSE(std::filesystem::exists(latin1));

  const auto odd_dir = dir / "d\xFF";
  std::filesystem::create_directories(odd_dir);
  const auto in_odd = run_command("cd '" + odd_dir.string() + "' && " + std::string(TRAINSCOPE_BIN) +
                                  " run resnet50 --iters 1 --warmup 0 --eval-batches 0 --db r.db");
  EXPECT_EQ(in_odd.exit_code, 2) << in_odd.out;
  EXPECT_NE(in_odd.out.find("the db path"), std::string::npos) << in_odd.out;
  EXPECT_FALSE(std::filesystem::exists(odd_dir / "r.db"));

  const auto fifo = dir / "hosts.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [hostfile, says] : std::vector<std::pair<std::string, std::string>>{
           {fifo.string(), "is a FIFO (named pipe), not a file"}, {"/dev/zero", "is a character device, not a file"}}) {
    res = run_trainscope("run resnet50 --iters 1 --eval-batches 0 --hostfile " + hostfile + " --db " +
                         (dir / "h.db").string());
    EXPECT_EQ(res.exit_code, 2) << hostfile << "\n" << res.out;
    EXPECT_NE(res.out.find(says), std::string::npos) << res.out;
  }
  const auto suite = run_trainscope("suite " + fifo.string() + " --db " + (dir / "s.db").string());
  EXPECT_EQ(suite.exit_code, 2) << suite.out;
  EXPECT_NE(suite.out.find("is a FIFO"), std::string::npos) << suite.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "h.db"));
  EXPECT_FALSE(std::filesystem::exists(dir / "s.db"));
}
