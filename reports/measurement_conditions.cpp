#include "reports/measurement_conditions.h"

#include "fmt/format.h"

namespace ts::reports {

namespace {

std::optional<double> find(const std::map<std::string, double>& metrics, const char* name) {
  const auto it = metrics.find(name);
  if (it == metrics.end()) return std::nullopt;
  return it->second;
}

std::string cores(double n) { return fmt::format("{:g} {}", n, n == 1 ? "core" : "cores"); }

}  // namespace

Conditions judge_conditions(const std::map<std::string, double>& m) {
  Conditions c;
  c.cpu_got_of_asked_percent = find(m, "conditions_cpu_got_of_asked_percent");
  c.threads_asked = find(m, "conditions_threads_asked");
  c.online_cores = find(m, "conditions_online_cores");
  c.process_cores = find(m, "conditions_process_cores");
  c.other_processes_cores = find(m, "conditions_other_processes_cores");
  c.steal_percent = find(m, "conditions_steal_percent");
  c.load_start = find(m, "conditions_load_average_start");
  c.load_end = find(m, "conditions_load_average_end");
  c.frequency_mhz = find(m, "conditions_cpu_frequency_mhz");
  c.processes_on_host = static_cast<int>(find(m, "conditions_job_processes_on_host").value_or(1));
  if (!c.cpu_got_of_asked_percent) return c;  // unknown: never "clean" for want of figures

  using T = NoiseThresholds;
  const double threads = c.threads_asked.value_or(1);
  const double online = c.online_cores.value_or(0);
  if (*c.cpu_got_of_asked_percent < T::min_cpu_got_of_asked_percent) {
    std::string why =
        fmt::format("the run got {:.0f}% of the {} it asked for", *c.cpu_got_of_asked_percent, cores(threads));
    if (online > 0 && threads > online) why += fmt::format(" (more threads than the {} online)", cores(online));
    c.reasons.push_back(why);
  }
  // The job's other ranks on this host are among the other processes: not judged then.
  if (c.other_processes_cores && c.processes_on_host <= 1 && *c.other_processes_cores > T::max_other_processes_cores) {
    c.reasons.push_back(fmt::format("other processes used {:.2f} cores", *c.other_processes_cores));
  }
  if (c.steal_percent && *c.steal_percent > T::max_steal_percent) {
    c.reasons.push_back(fmt::format("the hypervisor stole {:.1f}% of the CPU time", *c.steal_percent));
  }
  if (c.load_start && online > 0 && *c.load_start > T::max_load_per_core_at_start * online) {
    c.reasons.push_back(fmt::format("load {:.1f} on {} when it began", *c.load_start, cores(online)));
  }
  c.verdict = c.reasons.empty() ? Conditions::Verdict::clean : Conditions::Verdict::noisy;
  return c;
}

std::string Conditions::label() const {
  switch (verdict) {
    case Verdict::clean: return "clean";
    case Verdict::noisy: return "noisy";
    case Verdict::unknown: break;
  }
  return "unknown (not recorded)";
}

std::string Conditions::verdict_line() const {
  std::string s = label();
  for (size_t i = 0; i < reasons.size(); ++i) s += (i == 0 ? ": " : "; ") + reasons[i];
  return s;
}

std::string Conditions::figures_line() const {
  if (!cpu_got_of_asked_percent) return {};
  const double threads = threads_asked.value_or(1);
  std::string s =
      fmt::format("CPU {:.0f}% of {} {}", *cpu_got_of_asked_percent, threads, threads == 1 ? "thread" : "threads");
  if (other_processes_cores) {
    s += fmt::format("; other processes {:.2f} cores", *other_processes_cores);
    if (processes_on_host > 1) s += fmt::format(" (with this job's {} other ranks here)", processes_on_host - 1);
  }
  s += steal_percent ? fmt::format("; steal {:.1f}%", *steal_percent) : std::string("; steal unreadable");
  if (load_start || load_end) {
    const auto load = [](const std::optional<double>& v) { return v ? fmt::format("{:.1f}", *v) : std::string("?"); };
    s += fmt::format("; load {} -> {}", load(load_start), load(load_end));
    if (online_cores) s += " on " + cores(*online_cores);
  }
  s += frequency_mhz ? fmt::format("; {:.0f} MHz", *frequency_mhz) : std::string("; frequency unreadable");
  return s;
}

}  // namespace ts::reports
