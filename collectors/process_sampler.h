#pragma once
// A background sampler of the process and the machine: resident memory, process CPU and
// system CPU, every `interval`, on the steady-clock time axis of profiler/ and memprof/.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
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
