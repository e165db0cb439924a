#pragma once
// How long an OpenMP thread spins at a barrier before it sleeps. libgomp spins 300,000 times by
// default: on a machine where other work holds a core, the spinning thread burns the time its
// peer needs to reach the barrier, and `--threads 2` ran 3.7-5x slower than `--threads 1`
// (docs/measurements.md, "Threads on a busy machine"). libgomp reads its settings once, when it
// is loaded, before main() runs; so the commands that train or time set GOMP_SPINCOUNT and
// execute themselves again, unless the user chose a wait policy (OMP_WAIT_POLICY or
// GOMP_SPINCOUNT set), which is then kept. The run's environment records which was in force,
// and why (TS_OPENMP_WAITING).
#include <cstdint>
#include <optional>
#include <string>

namespace ts::cli {

// The spins trainscope asks for (GOMP_SPINCOUNT) where the cores its threads ask for are free:
// keeps a quiet machine's speed (3,000 spins: 52.3 images/s, as libgomp's default).
inline constexpr const char* kOpenMpSpinCount = "3000";
// Where other work already holds cores its threads need: sleep at once (0.98-1.0x of one thread
// with a core taken, where 3,000 spins gave 0.88x; costs about 11% on a quiet machine).
inline constexpr const char* kOpenMpSpinCountBusy = "0";
// How long the machine is watched before the choice (USER_HZ ticks of 10 ms: 10 per core).
inline constexpr int kBusyWindowMs = 100;

struct OpenMpWaiting {
  std::string spin_count;  // what GOMP_SPINCOUNT is set to
  std::string why;         // recorded as TS_OPENMP_WAITING
  std::string warning;     // a line for stderr ("" when all is well)
};

// The threads a command asks for on this machine: per rank, and its ranks here.
struct ThreadRequest {
  int64_t per_rank = 1, ranks = 1;
  int64_t total() const { return per_rank * ranks; }
};

// The choice, from the threads the command asks for, the online cores and the cores other work
// kept busy just before (unset: unreadable, or not measured because one thread never waits at
// a barrier). A pure function, for the tests.
OpenMpWaiting choose_openmp_waiting(ThreadRequest threads, int64_t online, std::optional<double> busy);

// What a `run`, `suite` or `bench` command line asks for on this machine: --threads per rank
// (0 or absent: the online cores shared among the ranks here, as session/run_plan.cpp shares
// them), --nproc ranks where it launches them here (not with --hosts or --hostfile).
ThreadRequest requested_threads(int argc, char** argv, int64_t online);

// For `run`, `suite` and `bench` (argv[1]) without a wait policy in the environment: chooses the
// spin count (choose_openmp_waiting, after watching the machine for kBusyWindowMs where more than
// one thread is asked for), prints its warning, sets GOMP_SPINCOUNT and TS_OPENMP_WAITING and
// replaces the process with itself (/proc/self/exe, the same arguments; the pid stays, so a
// launcher's ranks are unaffected). Returns where nothing is to be done, or where the
// re-execution failed (with a line on stderr: the run goes on with libgomp's default).
void settle_openmp_waiting(int argc, char** argv);

}  // namespace ts::cli
