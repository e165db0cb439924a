#include "collectors/measurement_conditions.h"

#include <algorithm>

namespace ts::collectors {

std::optional<MeasurementConditions> conditions_between(const CpuReading& run_start, const CpuReading& from,
                                                        const CpuReading& to, int threads_asked) {
  const int64_t wall_ns = to.t_ns - from.t_ns;
  if (wall_ns <= 0 || from.process_cpu_ns < 0 || to.process_cpu_ns < from.process_cpu_ns) return std::nullopt;
  MeasurementConditions c;
  c.window_s = static_cast<double>(wall_ns) * 1e-9;
  c.threads_asked = std::max(1, threads_asked);
  c.online_cores = std::max(1, to.online_cores);
  c.process_cores = static_cast<double>(to.process_cpu_ns - from.process_cpu_ns) / static_cast<double>(wall_ns);
  c.cpu_got_of_asked_percent = 100.0 * c.process_cores / c.threads_asked;
  if (from.system.ok && to.system.ok && to.system.total > from.system.total) {
    const double total = static_cast<double>(to.system.total - from.system.total);
    const double busy = static_cast<double>(to.system.busy - from.system.busy);
    const double steal = static_cast<double>(to.system.steal - from.system.steal);
    // Ticks of every core: their busy share times the cores is the busy cores. Stolen time is
    // no process's here, and the kernel's ticks (1/100 s) against getrusage's microseconds can
    // put this process above the machine's busy time in a short window: never below 0.
    c.other_processes_cores = std::max(0.0, (busy - steal) / total * c.online_cores - c.process_cores);
    c.steal_percent = 100.0 * steal / total;
  }
  c.load_start = run_start.load;
  c.load_end = to.load;
  c.frequency_mhz = to.mhz;
  return c;
}

}  // namespace ts::collectors
