#pragma once
// How long an OpenMP thread spins at a barrier before it sleeps. libgomp spins 300,000 times by
// default: on a machine where other work holds a core, the spinning thread burns the time its
// peer needs to reach the barrier, and `--threads 2` ran 3.7-5x slower than `--threads 1`
// (docs/measurements.md, "Threads on a busy machine"). libgomp reads its settings once, when it
// is loaded, before main() runs; so the commands that train or time set GOMP_SPINCOUNT and
// execute themselves again, unless the user chose a wait policy (OMP_WAIT_POLICY or
// GOMP_SPINCOUNT set), which is then kept. The run's environment records which was in force.

namespace ts::cli {

// The spins trainscope asks for (GOMP_SPINCOUNT): its one definition.
inline constexpr const char* kOpenMpSpinCount = "3000";

// For `run`, `suite` and `bench` (argv[1]) without a wait policy in the environment: sets
// GOMP_SPINCOUNT and replaces the process with itself (/proc/self/exe, the same arguments; the
// pid stays, so a launcher's ranks are unaffected). Returns where nothing is to be done, or
// where the re-execution failed (with a line on stderr: the run goes on with libgomp's default).
void settle_openmp_waiting(int argc, char** argv);

}  // namespace ts::cli
