#pragma once
// Ctrl-C and SIGTERM while runs execute. The first asks the run to stop: training after its
// current iteration, evaluation and model building at their next op. The second stops at once
// but first marks the run `interrupted` in its db (what was flushed is kept), so even an
// impatient user leaves a consistent, marked run behind.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>

namespace ts::cli {

// Blocks SIGINT and SIGTERM in this thread and every thread started after it, and starts the
// thread that waits for them. Call it before any other thread starts (OpenMP's, the sampler's).
void install_interrupt_handler();

// Set by the first signal; what the loops poll.
const std::atomic<bool>& stop_flag();
bool interrupt_requested();

// The run a second signal marks before the process ends; cleared when its final write is done.
void set_current_run(const std::filesystem::path& db, int64_t run_id);
void clear_current_run();

// A rank of a distributed run: once asked to stop (mpirun sends SIGTERM to every rank when one
// dies), the process gives itself `deadline` to finish; past it, the ranks it waits for are taken
// as gone: it marks its run failed (rank 0; what was streamed is kept) and ends.
void set_stop_deadline(std::chrono::milliseconds deadline);

// A rank's deadline (every rank of `run` and `bench collectives`): below the launcher's SIGKILL
// grace (dist::default_mca, 10 s).
inline constexpr std::chrono::seconds kRankStopDeadline{8};

}  // namespace ts::cli
