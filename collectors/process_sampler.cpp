#include "collectors/process_sampler.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "vocabulary/clock.h"

namespace ts::collectors {

int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");  // second field: resident pages
  int64_t size = 0;
  int64_t resident = 0;
  if (!(in >> size >> resident)) return -1;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");  // "5": reset the peak resident set size (Linux 4.0+)
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   123456 kB"
  }
  return -1;
}

namespace {

using vocabulary::now_ns;  // the axis of the tracer's events and the ledger's changes

// User + system CPU time of the whole process, in ns.
int64_t process_cpu_ns() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
  auto ns = [](const timeval& t) { return int64_t{t.tv_sec} * 1'000'000'000 + int64_t{t.tv_usec} * 1000; };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

struct SystemTicks {
  int64_t busy = 0;
  int64_t total = 0;
  bool ok = false;
};

// First line of /proc/stat: "cpu user nice system idle iowait irq softirq steal ...".
SystemTicks system_ticks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  int64_t v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return {};
  for (int64_t& x : v) {
    if (!(in >> x)) return {};
  }
  SystemTicks t;
  for (int64_t x : v) t.total += x;
  t.busy = t.total - v[3] - v[4];  // minus idle and iowait
  t.ok = true;
  return t;
}

}  // namespace

ProcessSampler::~ProcessSampler() { stop(); }

void ProcessSampler::start(std::chrono::milliseconds interval) {
  if (interval.count() <= 0) throw std::invalid_argument("collectors: sampling interval must be positive");
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) throw std::logic_error("collectors: ProcessSampler already running");
  stop_requested_ = false;
  thread_ = std::thread([this, interval] { loop(interval); });
}

void ProcessSampler::stop() {
  std::thread t;
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
    t = std::move(thread_);
  }
  wake_.notify_all();
  if (t.joinable()) t.join();
}

bool ProcessSampler::running() const {
  std::lock_guard lock(mutex_);
  return thread_.joinable();
}

std::vector<Sample> ProcessSampler::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

std::vector<Sample> ProcessSampler::samples_since(size_t& cursor) const {
  std::lock_guard lock(mutex_);
  if (cursor > samples_.size()) cursor = 0;  // clear() since: start again
  std::vector<Sample> out(samples_.begin() + static_cast<std::ptrdiff_t>(cursor), samples_.end());
  cursor = samples_.size();
  return out;
}

void ProcessSampler::clear() {
  std::lock_guard lock(mutex_);
  samples_.clear();
}

void ProcessSampler::loop(std::chrono::milliseconds interval) {
  int64_t last_wall = now_ns();
  int64_t last_cpu = process_cpu_ns();
  SystemTicks last_sys = system_ticks();
  // Reads /proc and appends one round of samples; called without the lock samples() takes.
  auto take = [&](bool first) {
    const int64_t wall = now_ns();
    const int64_t rss = rss_bytes();
    const int64_t cpu = process_cpu_ns();
    const SystemTicks sys = system_ticks();
    std::vector<Sample> fresh;
    if (rss >= 0) fresh.push_back({wall, "rss_bytes", static_cast<double>(rss)});
    if (!first && cpu >= 0 && last_cpu >= 0 && wall > last_wall) {
      fresh.push_back({wall, "process_cpu_percent",
                       100.0 * static_cast<double>(cpu - last_cpu) / static_cast<double>(wall - last_wall)});
    }
    if (!first && sys.ok && last_sys.ok && sys.total > last_sys.total) {
      fresh.push_back(
          {wall, "system_cpu_percent",
           100.0 * static_cast<double>(sys.busy - last_sys.busy) / static_cast<double>(sys.total - last_sys.total)});
    }
    last_wall = wall;
    last_cpu = cpu;
    last_sys = sys;
    std::lock_guard lock(mutex_);
    samples_.insert(samples_.end(), fresh.begin(), fresh.end());
  };
  // A first and a last sample bracket even a run shorter than one interval.
  take(true);
  auto next = std::chrono::steady_clock::now() + interval;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_until(lock, next, [this] { return stop_requested_; })) {
    next += interval;
    lock.unlock();
    take(false);
    lock.lock();
    // A slow sample (a loaded machine) skips missed ticks rather than bursting to catch up.
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now() + interval;
  }
  lock.unlock();
  take(false);
}

}  // namespace ts::collectors
