#include "cli/interrupts.h"

#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <mutex>
#include <thread>

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "fmt/format.h"
#include "session/run_record.h"

namespace ts::cli {

namespace {

std::atomic<bool> g_stop{false};

std::mutex g_run_mutex;
std::filesystem::path g_run_db;  // guarded by g_run_mutex
int64_t g_run_id = 0;            // guarded by g_run_mutex; 0: no run to mark

// A second signal: mark the run from a connection of our own (the main thread may be inside
// a transaction: SQLite makes us wait for it, at most 3 s), then end the process. If even
// that fails, the run is left `running` and readers see its writer gone (`lost`).
[[noreturn]] void stop_now() {
  std::lock_guard lock(g_run_mutex);
  if (g_run_id > 0) {
    try {
      if (session::RunRecord::finish_elsewhere(
              g_run_db, g_run_id, store::RunStatus::interrupted,
              "stopped at once by a second interrupt: what was flushed before it is kept", std::chrono::seconds(3)))
        say(stderr, "\ntrainscope: run {} marked interrupted; stopping now\n", g_run_id);
    } catch (const std::exception& e) {
      say(stderr, "\ntrainscope: could not mark run {} interrupted ({}); it will show as lost\n", g_run_id, e.what());
    }
  }
  std::_Exit(kExitInterrupted);
}

std::atomic<int64_t> g_requested_deadline_ms{0};
std::atomic<int64_t> g_terminated_deadline_ms{0};
std::atomic<pid_t> g_job_launcher{0};
std::atomic<int> g_relayed{0};  // signals relayed to the running job

// The deadline passed: the ranks this one waits for do not answer.
[[noreturn]] void give_up() {
  std::lock_guard lock(g_run_mutex);
  if (g_run_id > 0) {
    try {
      if (session::RunRecord::finish_elsewhere(g_run_db, g_run_id, store::RunStatus::failed,
                                               "the job was stopped and other ranks stopped answering (a rank died, "
                                               "or mpirun was interrupted): kept what was streamed",
                                               std::chrono::seconds(3)))
        say(stderr, "\ntrainscope: run {} marked failed: other ranks stopped answering\n", g_run_id);
    } catch (const std::exception& e) {
      say(stderr, "\ntrainscope: could not mark run {} failed ({}); it will show as lost\n", g_run_id, e.what());
    }
  }
  std::_Exit(kExitRunFailed);
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "Ctrl-C";
    case SIGUSR1: return "a stop request from the launcher";
    case SIGHUP: return "SIGHUP (the terminal or session closed)";
    default: return "SIGTERM";
  }
}

void relay_to_job(pid_t mpirun) {
  const int n = ++g_relayed;
  ::kill(mpirun, n <= 2 ? SIGUSR1 : SIGTERM);
  say(stderr, "\ntrainscope: {}\n",
      n == 1   ? "asking every rank to stop after its current step (again to stop them at once)"
      : n == 2 ? "asking every rank to stop at once (again to have mpirun kill them)"
               : "asking mpirun to kill the ranks");
}

void wait_for_signals(sigset_t set) {
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    if (const pid_t mpirun = g_job_launcher.load(); mpirun > 0) {
      g_stop.store(true);  // a suite starts no further entry
      relay_to_job(mpirun);
      continue;
    }
    if (g_stop.exchange(true)) stop_now();
    const int64_t ms = (signal == SIGUSR1 ? g_requested_deadline_ms : g_terminated_deadline_ms).load();
    if (ms > 0) {
      std::thread([ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        give_up();
      }).detach();
    }
    say(stderr, "\ntrainscope: {} received: stopping after the current step (again to stop at once)\n",
        signal_name(signal));
  }
}

}  // namespace

void install_interrupt_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);                   // the launcher's relayed stop (a rank's default would be to die)
    sigaddset(&set, SIGHUP);                    // a closed terminal or ssh session: as SIGTERM, so the run is stored
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread started later
    std::thread(wait_for_signals, set).detach();
  });
}

const std::atomic<bool>& stop_flag() { return g_stop; }
bool interrupt_requested() { return g_stop.load(); }

void set_current_run(const std::filesystem::path& db, int64_t run_id) {
  std::lock_guard lock(g_run_mutex);
  g_run_db = db;
  g_run_id = run_id;
}

void set_stop_deadlines(StopDeadlines deadlines) {
  g_requested_deadline_ms.store(deadlines.requested.count());
  g_terminated_deadline_ms.store(deadlines.terminated.count());
}

void set_job_launcher(pid_t mpirun) {
  g_relayed.store(0);
  g_job_launcher.store(mpirun);
  // A signal that came while mpirun was starting found no job to relay to: relay it now.
  if (mpirun > 0 && g_stop.load()) relay_to_job(mpirun);
}

void clear_current_run() {
  std::lock_guard lock(g_run_mutex);
  g_run_id = 0;
}

}  // namespace ts::cli
