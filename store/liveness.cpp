#include "store/liveness.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

namespace ts::store {

std::string_view to_string(Liveness l) {
  switch (l) {
    case Liveness::finished: return "finished";
    case Liveness::live: return "live";
    case Liveness::stalled: return "stalled";
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

namespace {

// Clocks of hosts kept by NTP differ by milliseconds; a heartbeat dated further ahead than this
// comes from a host whose clock is off.
constexpr int64_t kSkewToleranceMs = 5'000;

// A writer that is there (alive, or heard from) but whose run has not advanced for longer than
// it allows (both times on the writer's clock, so no skew between hosts enters).
std::optional<LivenessVerdict> stalled(const RunRow& run, const std::string& alive) {
  if (run.progress_ms <= 0 || run.stall_after_ms <= 0) return std::nullopt;
  const int64_t still = run.heartbeat_ms - run.progress_ms;
  if (still <= run.stall_after_ms) return std::nullopt;
  return LivenessVerdict{Liveness::stalled, fmt::format("{}, but no new iteration for {} s (it allows {} s)", alive,
                                                        still / 1000, run.stall_after_ms / 1000)};
}

LivenessVerdict alive_or_stalled(const RunRow& run, std::string alive) {
  if (auto s = stalled(run, alive)) return *s;
  return {Liveness::live, std::move(alive)};
}

}  // namespace

LivenessVerdict liveness(const RunRow& run, const ProcessIdentity& here, int64_t now_ms) {
  if (run.status != RunStatus::running) return {Liveness::finished, std::string(to_string(run.status))};
  if (run.pid == 0) return {Liveness::unknown, "written without a heartbeat (a trainscope before schema v3)"};
  const int64_t limit = std::max<int64_t>(60'000, 5 * run.heartbeat_interval_ms);
  const int64_t age = now_ms - run.heartbeat_ms;
  if (run.host == here.host && !run.boot_id.empty() && run.boot_id == here.boot_id) {
    if (process_start_time(run.pid) != run.pid_start || run.pid_start == 0)
      return {Liveness::lost, fmt::format("process {} on this host is gone", run.pid)};
    // This host's clock dated the heartbeat: a process that stopped writing (stopped, hung) is stalled.
    if (run.heartbeat_interval_ms > 0 && run.heartbeat_ms > 0 && age > limit)
      return {Liveness::stalled, fmt::format("process {} is there but has not written for {} s (due every {} s)",
                                             run.pid, age / 1000, run.heartbeat_interval_ms / 1000.0)};
    return alive_or_stalled(run, fmt::format("process {} is running", run.pid));
  }
  if (run.host == here.host && run.boot_id != here.boot_id) return {Liveness::lost, "this host was restarted since"};
  if (run.heartbeat_ms != 0 && age < -kSkewToleranceMs) {
    // Dated ahead of this host's clock: how old the heartbeat is cannot be told from it; the
    // db file's last write, by this host's (or its file server's) clock, can.
    const std::string skew = fmt::format("{}'s clock is at least {} s ahead of this host's", run.host, -age / 1000);
    const int64_t written_age = now_ms - run.db_written_ms;
    if (run.db_written_ms == 0) return {Liveness::unknown, skew + ", and the db's last write is unknown"};
    if (written_age > limit)
      return {Liveness::lost, fmt::format("nothing written to the db for {} s ({})", written_age / 1000, skew)};
    return alive_or_stalled(run, fmt::format("the db was written {} s ago ({})", written_age / 1000, skew));
  }
  if (run.heartbeat_ms == 0 || age > limit)
    return {Liveness::lost, fmt::format("no heartbeat from {} for {} s (due every {} s)", run.host, age / 1000,
                                        run.heartbeat_interval_ms / 1000.0)};
  return alive_or_stalled(run, fmt::format("heartbeat from {} {} s ago", run.host, std::max<int64_t>(age, 0) / 1000));
}

LivenessVerdict liveness(const RunRow& run) { return liveness(run, current_process(), unix_time_ms()); }

std::string new_run_uuid() {
  std::random_device rd;
  std::array<uint32_t, 4> w{rd(), rd(), rd(), rd()};
  w[1] = (w[1] & 0xffff0fffu) | 0x00004000u;  // version 4
  w[2] = (w[2] & 0x3fffffffu) | 0x80000000u;  // the RFC 4122 variant
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:04x}{:08x}", w[0], w[1] >> 16, w[1] & 0xffffu, w[2] >> 16,
                     w[2] & 0xffffu, w[3]);
}

int64_t last_written_ms(const std::filesystem::path& db) {
  int64_t newest = 0;
  for (const auto& p : {db, std::filesystem::path(db.string() + "-wal")}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;
    newest = std::max<int64_t>(newest, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000);
  }
  return newest;
}

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
    case Liveness::stalled: return "stalled";
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
