#pragma once
// Ctrl-C, SIGTERM and SIGHUP (a closed terminal) while runs execute. The first asks the run to
// stop: training after its current iteration, evaluation and model building at their next op.
// The second stops at once
// but first marks the run `interrupted` in its db (what was flushed is kept), so even an
// impatient user leaves a consistent, marked run behind.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>

namespace ts::cli {

// Blocks SIGINT, SIGTERM, SIGHUP and SIGUSR1 in this thread and every thread started after it, and starts the
// thread that waits for them. Call it before any other thread starts (OpenMP's, the sampler's).
void install_interrupt_handler();

// Set by the first signal; what the loops poll.
const std::atomic<bool>& stop_flag();
bool interrupt_requested();

// The run a second signal marks before the process ends; cleared when its final write is done.
void set_current_run(const std::filesystem::path& db, int64_t run_id);
void clear_current_run();

// The launcher of a distributed job (`run --nproc`, `bench collectives`) relays its signals to
// the ranks through mpirun, whose pid it registers here while mpirun runs (0: none runs). The
// first and second as SIGUSR1, which mpirun passes to every rank at once and which a rank takes
// as a first and second signal; any later one as SIGTERM, on which mpirun kills the ranks. The
// launcher itself goes on waiting for mpirun, then marks what the ranks left.
void set_job_launcher(pid_t mpirun);

// A rank of a distributed run, once asked to stop, gives itself a deadline; past it, the ranks
// it waits for are taken as gone: it marks its run failed (rank 0; what was streamed is kept)
// and ends.
struct StopDeadlines {
  std::chrono::milliseconds requested;   // after SIGUSR1, the launcher's relayed Ctrl-C: a step may be long
  std::chrono::milliseconds terminated;  // after SIGTERM: mpirun's, 5 s after a rank died
};
void set_stop_deadlines(StopDeadlines deadlines);

// Every rank's (`run` and `bench collectives`): `terminated` below the 5 s from mpirun's SIGTERM
// to its SIGKILL (distributed::default_mca).
inline constexpr StopDeadlines kRankStopDeadlines{std::chrono::seconds(60), std::chrono::seconds(4)};

}  // namespace ts::cli
