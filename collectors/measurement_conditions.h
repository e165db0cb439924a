#pragma once
// What the machine gave a run over a window of it (its timed iterations): the CPU it got against
// the threads it asked for, what other processes and the hypervisor took, the load and the clock
// (docs/formulas.md, "Measurement conditions"). Judging them is the run digest's
// (reports/measurement_conditions.h): this only measures.
#include <optional>

#include "collectors/process_sampler.h"

namespace ts::collectors {

struct MeasurementConditions {
  double window_s = 0;
  int threads_asked = 1;
  int online_cores = 1;
  double process_cores = 0;             // this process's CPU time over the window's wall time
  double cpu_got_of_asked_percent = 0;  // process_cores / threads_asked, in %
  // Unset where /proc/stat was unreadable.
  std::optional<double> other_processes_cores;  // the system's busy cores (steal left out) minus this process's
  std::optional<double> steal_percent;          // of every core's time in the window
  // Unset where unreadable.
  std::optional<double> load_start, load_end;  // one-minute load averages
  std::optional<double> frequency_mhz;         // the cores' mean at the window's end
};

// `run_start`: read when the run began (its load is the one before the run loaded the machine);
// `from`, `to`: the window. Unset where the window has no length or the process's CPU time was
// unreadable.
std::optional<MeasurementConditions> conditions_between(const CpuReading& run_start, const CpuReading& from,
                                                        const CpuReading& to, int threads_asked);

}  // namespace ts::collectors
