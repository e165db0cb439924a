#include "store/liveness.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <sstream>

namespace ts::store {

std::string_view to_string(Liveness l) {
  switch (l) {
    case Liveness::finished: return "finished";
    case Liveness::live: return "live";
    case Liveness::lost: return "lost";
    case Liveness::unknown: return "unknown";
  }
  return "unknown";
}

int64_t unix_time_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t process_start_time(int64_t pid) {
  if (pid <= 0) return 0;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!in || !std::getline(in, stat)) return 0;
  // Field 2 (the command name) is in parentheses and may hold spaces: count from the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && field == "Z") return 0;  // a zombie has exited: it writes nothing more
    if (i == 22) return std::strtoll(field.c_str(), nullptr, 10);
  }
  return 0;
}

ProcessIdentity current_process() {
  ProcessIdentity id;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) id.host = host.data();
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, id.boot_id);
  id.pid = getpid();
  id.pid_start = process_start_time(id.pid);
  return id;
}

LivenessVerdict liveness(const RunRow& run, const ProcessIdentity& here, int64_t now_ms) {
  if (run.status != RunStatus::running) return {Liveness::finished, std::string(to_string(run.status))};
  if (run.pid == 0) return {Liveness::unknown, "written without a heartbeat (a trainscope before schema v3)"};
  if (run.host == here.host && !run.boot_id.empty() && run.boot_id == here.boot_id) {
    if (process_start_time(run.pid) == run.pid_start && run.pid_start != 0)
      return {Liveness::live, fmt::format("process {} is running", run.pid)};
    return {Liveness::lost, fmt::format("process {} on this host is gone", run.pid)};
  }
  if (run.host == here.host && run.boot_id != here.boot_id) return {Liveness::lost, "this host was restarted since"};
  const int64_t limit = std::max<int64_t>(60'000, 5 * run.heartbeat_interval_ms);
  const int64_t age = now_ms - run.heartbeat_ms;
  if (run.heartbeat_ms == 0 || age > limit)
    return {Liveness::lost, fmt::format("no heartbeat from {} for {} s (due every {} s)", run.host, age / 1000,
                                        run.heartbeat_interval_ms / 1000.0)};
  return {Liveness::live, fmt::format("heartbeat from {} {} s ago", run.host, age / 1000)};
}

LivenessVerdict liveness(const RunRow& run) { return liveness(run, current_process(), unix_time_ms()); }

void set_writer(RunInfo& info, const ProcessIdentity& who) {
  info.host = who.host;
  info.boot_id = who.boot_id;
  info.pid = who.pid;
  info.pid_start = who.pid_start;
}

std::string status_label(const RunRow& run, const LivenessVerdict& verdict) {
  switch (verdict.state) {
    case Liveness::finished: return std::string(to_string(run.status));
    case Liveness::live: return "running";
    case Liveness::lost: return "lost";
    case Liveness::unknown: return "running?";
  }
  return "running?";
}

std::string status_label(const RunRow& run) {
  if (run.status != RunStatus::running) return std::string(to_string(run.status));
  return status_label(run, liveness(run));
}

}  // namespace ts::store
