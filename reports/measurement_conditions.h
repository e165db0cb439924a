#pragma once
// Whether a run was measured on a machine that gave it what it asked for: clean, noisy (with the
// reasons in words) or unknown, judged from the conditions_* metrics the run stored
// (docs/formulas.md, "Measurement conditions"). The run digest holds the verdict, so every view
// says the same.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ts::reports {

// The thresholds, in one place. A run is noisy when any is crossed:
struct NoiseThresholds {
  // The run got less than this share of the CPU its threads asked for. oneDNN and OpenMP keep
  // their threads busy through a step, so a starved run shows far below this: 33-60% on the
  // 2-core machine at load 4-7 that raised this.
  // Not yet calibrated on an idle machine (docs/formulas.md): a workload with long serial parts
  // may sit near it there.
  static constexpr double min_cpu_got_of_asked_percent = 90;
  // Other processes used more than a quarter of a core on average: their work shares caches,
  // memory bandwidth and, when the run's threads fill the cores, the cores themselves.
  static constexpr double max_other_processes_cores = 0.25;
  // The hypervisor gave more than 2% of the cores' time to other guests (a virtual machine).
  static constexpr double max_steal_percent = 2;
  // The one-minute load when the run began was over 1.5 per core: the machine was already
  // oversubscribed. Only a clear excess counts: the average lags, and in a suite it still holds
  // the run before; the figures above are the direct measures of the timed iterations.
  static constexpr double max_load_per_core_at_start = 1.5;
};

struct Conditions {
  enum class Verdict { unknown, clean, noisy };
  Verdict verdict = Verdict::unknown;
  std::vector<std::string> reasons;  // noisy: each threshold crossed, in words
  // The stored figures (unset: not stored; the frequency: unreadable on that machine).
  std::optional<double> cpu_got_of_asked_percent, threads_asked, online_cores, process_cores;
  std::optional<double> other_processes_cores, steal_percent, load_start, load_end, frequency_mhz;
  int processes_on_host = 1;

  // "clean", "noisy" or "unknown (not recorded)".
  std::string label() const;
  // The label with the reasons ("noisy: the run got 41% of the 2 cores it asked for; ...").
  std::string verdict_line() const;
  // The figures in words ("CPU 98% of 2 threads; other processes 0.05 cores; steal 0.0%; load
  // 0.4 -> 1.9 on 2 cores; 2400 MHz"); empty when none was recorded.
  std::string figures_line() const;
  bool noisy() const { return verdict == Verdict::noisy; }
};

// From a run's whole-run metrics (name -> value). A run without conditions_cpu_got_of_asked_percent
// (stored before there were conditions, or cut short before its final write) is unknown.
Conditions judge_conditions(const std::map<std::string, double>& metrics);

}  // namespace ts::reports
