#pragma once
// A background sampler of the process and the machine: resident memory, process CPU and
// system CPU, every `interval`, on the steady-clock time axis of profiler/ and memprof/.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace ts::collectors {

// Names: "rss_bytes"; "process_cpu_percent" (user+sys CPU time of this process over wall
// time, 100 = one core busy); "system_cpu_percent" (busy share of all cores from /proc/stat,
// 100 = every core busy).
struct Sample {
  int64_t t_ns = 0;
  std::string name;
  double value = 0;
};

// The process's resident set size now (/proc/self/statm), and its high-water mark (VmHWM in
// /proc/self/status: exact, where the sampler's readings may miss a short peak) since the process
// started or reset_peak_rss() last succeeded (false where the kernel does not allow it); -1 where
// unreadable.
int64_t rss_bytes();
int64_t peak_rss_bytes();
bool reset_peak_rss();

// The first line of /proc/stat summed over every core, in ticks: busy (all but idle and iowait,
// steal included), steal (time the hypervisor gave this machine's CPUs to someone else) and the
// total. Not ok where the text is not /proc/stat's.
struct SystemTicks {
  int64_t busy = 0, steal = 0, total = 0;
  bool ok = false;
};
// The parsers take the files' contents, so that fixed text tests them.
SystemTicks parse_proc_stat(std::string_view text);
// /proc/loadavg's first field: the runnable (and uninterruptible) tasks averaged over one minute.
std::optional<double> parse_load_average(std::string_view text);
// A cpufreq file's value (scaling_cur_freq: kHz).
std::optional<double> parse_frequency_khz(std::string_view text);

// Cumulative counters read together: two readings bracket a window (a run's timed iterations,
// collectors/measurement_conditions.h). Unset or negative: unreadable here, never guessed.
struct CpuReading {
  int64_t t_ns = 0;             // vocabulary::now_ns()
  int64_t process_cpu_ns = -1;  // user + system CPU time of this process since it started
  SystemTicks system;           // /proc/stat
  std::optional<double> load;   // /proc/loadavg, one minute
  std::optional<double> mhz;    // scaling_cur_freq averaged over the online cores that have one
  int online_cores = 0;         // sysconf(_SC_NPROCESSORS_ONLN)
};
CpuReading read_cpu();

// The cores kept busy (steal included) over `window` while the caller sleeps through it: what
// other work takes from this machine as a run begins. Unset where /proc/stat is unreadable.
std::optional<double> busy_cores_over(std::chrono::milliseconds window);

class ProcessSampler {
 public:
  ProcessSampler() = default;
  ~ProcessSampler();
  ProcessSampler(const ProcessSampler&) = delete;
  ProcessSampler& operator=(const ProcessSampler&) = delete;

  // Starts the sampling thread; the first sample is taken one interval after start.
  // Already running: std::logic_error. Samples of an earlier start()/stop() are kept.
  void start(std::chrono::milliseconds interval);
  // Wakes and joins the thread at once (no waiting for the interval). Idempotent.
  void stop();
  bool running() const;

  std::vector<Sample> samples() const;
  // The samples taken since `cursor` (an index the caller keeps, 0 at first); advances it.
  std::vector<Sample> samples_since(size_t& cursor) const;
  void clear();

 private:
  void loop(std::chrono::milliseconds interval);

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_requested_ = false;
  std::thread thread_;
  std::vector<Sample> samples_;
};

}  // namespace ts::collectors
