#include "collectors/process_sampler.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "vocabulary/clock.h"

namespace ts::collectors {

namespace {

// A whole small file (/proc, /sys); empty where unreadable.
std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

std::optional<double> first_number(std::string_view text) {
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end && (*p == ' ' || *p == '\t')) ++p;
  double v = 0;
  const auto [next, ec] = std::from_chars(p, end, v);
  if (ec != std::errc() || next == p || v < 0) return std::nullopt;
  return v;
}

}  // namespace

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

SystemTicks parse_proc_stat(std::string_view text) {
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice" (guest time is
  // already in user and nice: not added twice).
  std::istringstream in{std::string(text.substr(0, text.find('\n')))};
  std::string cpu;
  int64_t v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return {};
  int fields = 0;
  for (int64_t& x : v) {
    if (!(in >> x)) break;
    ++fields;
  }
  if (fields < 4) return {};  // steal and the rest came later (Linux 2.6.11); missing ones are 0
  SystemTicks t;
  for (int64_t x : v) t.total += x;
  t.busy = t.total - v[3] - v[4];  // minus idle and iowait
  t.steal = v[7];
  t.ok = true;
  return t;
}

std::optional<double> parse_load_average(std::string_view text) { return first_number(text); }

std::optional<double> parse_frequency_khz(std::string_view text) {
  const auto v = first_number(text);
  if (!v || *v <= 0) return std::nullopt;
  return v;
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

// The online cores' current frequencies (where cpufreq exposes them), averaged.
std::optional<double> mean_frequency_mhz() {
  namespace fs = std::filesystem;
  std::error_code ec;
  double sum = 0;
  int n = 0;
  for (fs::directory_iterator it("/sys/devices/system/cpu", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 4 || name.rfind("cpu", 0) != 0 || name.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    if (const auto khz = parse_frequency_khz(read_text(it->path() / "cpufreq" / "scaling_cur_freq"))) {
      sum += *khz / 1000.0;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

}  // namespace

std::optional<double> busy_cores_over(std::chrono::milliseconds window) {
  const SystemTicks before = parse_proc_stat(read_text("/proc/stat"));
  std::this_thread::sleep_for(window);
  const SystemTicks after = parse_proc_stat(read_text("/proc/stat"));
  const int64_t total = after.total - before.total;
  if (!before.ok || !after.ok || total <= 0) return std::nullopt;
  const long online = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  return static_cast<double>(after.busy - before.busy) / static_cast<double>(total) * static_cast<double>(online);
}

CpuReading read_cpu() {
  CpuReading r;
  r.t_ns = now_ns();
  r.process_cpu_ns = process_cpu_ns();
  r.system = parse_proc_stat(read_text("/proc/stat"));
  r.load = parse_load_average(read_text("/proc/loadavg"));
  r.mhz = mean_frequency_mhz();
  r.online_cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  return r;
}

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
  SystemTicks last_sys = parse_proc_stat(read_text("/proc/stat"));
  // Reads /proc and appends one round of samples; called without the lock samples() takes.
  auto take = [&](bool first) {
    const int64_t wall = now_ns();
    const int64_t rss = rss_bytes();
    const int64_t cpu = process_cpu_ns();
    const SystemTicks sys = parse_proc_stat(read_text("/proc/stat"));
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
