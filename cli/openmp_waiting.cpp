#include "cli/openmp_waiting.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cli/console.h"
#include "collectors/process_sampler.h"
#include "fmt/format.h"
#include "reports/number_format.h"

namespace ts::cli {

OpenMpWaiting choose_openmp_waiting(ThreadRequest request, int64_t online, std::optional<double> busy) {
  const int64_t threads = request.total();
  if (threads <= 1) return {kOpenMpSpinCount, "spin: one thread waits at no barrier", ""};
  if (!busy) return {kOpenMpSpinCount, "spin: the machine's load is unreadable here", ""};
  const double taken = std::clamp(*busy, 0.0, static_cast<double>(online));
  const double free = static_cast<double>(online) - taken;
  const std::string seen =
      fmt::format("{:.1f} of {} busy with other work as it began", taken, reports::counted(online, "core"));
  // Half a core of slack: a shell, a sampler or the build beside it do not make threads wait.
  if (static_cast<double>(threads) <= free + 0.5) {
    return {kOpenMpSpinCount, fmt::format("spin: {} threads, {}", threads, seen), ""};
  }
  // What fits, per rank: the suggestion is a --threads value.
  const int64_t fits = std::max<int64_t>(1, std::llround(free) / std::max<int64_t>(1, request.ranks));
  return {kOpenMpSpinCountBusy, fmt::format("sleep: {} threads, {}", threads, seen),
          fmt::format("trainscope: {} asked for, but {}: the threads share about {:.1f} cores, so they sleep at "
                      "barriers instead of spinning (GOMP_SPINCOUNT={}); --threads {} may be faster\n",
                      reports::counted(threads, "thread"), seen, free, kOpenMpSpinCountBusy, fits)};
}

namespace {

// A flag's value: "--name V" or "--name=V"; unset where absent or not a whole number.
std::optional<int64_t> flag_value(int argc, char** argv, std::string_view name) {
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    std::string_view v;
    if (a == name && i + 1 < argc) {
      v = argv[i + 1];
    } else if (a.starts_with(name) && a.size() > name.size() && a[name.size()] == '=') {
      v = a.substr(name.size() + 1);
    } else {
      continue;
    }
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && end == v.data() + v.size()) return n;
    return std::nullopt;
  }
  return std::nullopt;
}

bool has_flag(int argc, char** argv, std::string_view name) {
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == name || (a.starts_with(name) && a.size() > name.size() && a[name.size()] == '=')) return true;
  }
  return false;
}

}  // namespace

ThreadRequest requested_threads(int argc, char** argv, int64_t online) {
  const int64_t threads = flag_value(argc, argv, "--threads").value_or(0);
  // Ranks on other hosts (--hosts, --hostfile) wait on their own machines' cores.
  const bool elsewhere =
      has_flag(argc, argv, "--hosts") || has_flag(argc, argv, "--hostfile") || std::string_view(argv[1]) == "bench";
  const int64_t ranks = elsewhere ? 1 : std::max<int64_t>(1, flag_value(argc, argv, "--nproc").value_or(1));
  return {threads > 0 ? threads : std::max<int64_t>(1, online / ranks), ranks};
}

void settle_openmp_waiting(int argc, char** argv) {
  if (argc < 2) return;
  const std::string_view command = argv[1];
  // Only what trains or times: the other commands run no parallel region worth a second start.
  if (command != "run" && command != "suite" && command != "bench") return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  const int64_t online = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  const ThreadRequest threads = requested_threads(argc, argv, online);
  std::optional<double> busy;
  if (threads.total() > 1) busy = collectors::busy_cores_over(std::chrono::milliseconds(kBusyWindowMs));
  const OpenMpWaiting choice = choose_openmp_waiting(threads, online, busy);
  if (::setenv("GOMP_SPINCOUNT", choice.spin_count.c_str(), 1) != 0) return;
  ::setenv("TS_OPENMP_WAITING", choice.why.c_str(), 1);
  if (!choice.warning.empty()) say(stderr, "{}", choice.warning);
  std::fflush(stderr);
  ::execv("/proc/self/exe", argv);
  // Still here: the exec failed. Take the variables back so the record says what was in force.
  const int error = errno;
  ::unsetenv("GOMP_SPINCOUNT");
  ::unsetenv("TS_OPENMP_WAITING");
  say(stderr,
      "trainscope: could not restart with GOMP_SPINCOUNT={} ({}); OpenMP threads keep libgomp's "
      "default spinning, which is slow on a busy machine\n",
      choice.spin_count, std::strerror(error));
}

}  // namespace ts::cli
