#include "collectors/process_sampler.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>

namespace ts::collectors {
namespace {

using namespace std::chrono_literals;

std::vector<double> values(const std::vector<Sample>& samples, const std::string& name) {
  std::vector<double> out;
  for (const auto& s : samples) {
    if (s.name == name) out.push_back(s.value);
  }
  return out;
}

TEST(ProcessSampler, SamplesRssAndCpu) {
  ProcessSampler sampler;
  sampler.start(10ms);
  EXPECT_TRUE(sampler.running());
  std::this_thread::sleep_for(120ms);
  sampler.stop();
  EXPECT_FALSE(sampler.running());
  const auto samples = sampler.samples();
  const auto rss = values(samples, "rss_bytes");
  ASSERT_GE(rss.size(), 3u);
  for (double v : rss) EXPECT_GT(v, 0);
  const auto cpu = values(samples, "process_cpu_percent");
  ASSERT_FALSE(cpu.empty());
  for (double v : cpu) EXPECT_GE(v, 0);
  for (double v : values(samples, "system_cpu_percent")) {
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 100.0 + 1e-9);
  }
  EXPECT_TRUE(
      std::is_sorted(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; }));
}

// stop() wakes the sampler instead of waiting out its interval: a minute here, so that a slow or
// loaded machine, which may take a while to reschedule the thread, cannot blur the difference.
TEST(ProcessSampler, StopIsPrompt) {
  ProcessSampler sampler;
  sampler.start(60s);
  std::this_thread::sleep_for(20ms);
  const auto t0 = std::chrono::steady_clock::now();
  sampler.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  sampler.stop();  // idempotent
  EXPECT_THROW(sampler.start(0ms), std::invalid_argument);
}

TEST(ProcessSampler, StartTwiceThrowsRestartWorks) {
  ProcessSampler sampler;
  sampler.start(10ms);
  EXPECT_THROW(sampler.start(10ms), std::logic_error);
  sampler.stop();
  sampler.clear();
  sampler.start(10ms);
  std::this_thread::sleep_for(50ms);
  sampler.stop();
  EXPECT_FALSE(values(sampler.samples(), "rss_bytes").empty());
}

int64_t cpu_ns() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ns = [](const timeval& t) { return int64_t{t.tv_sec} * 1'000'000'000 + int64_t{t.tv_usec} * 1000; };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Compared with the CPU the busy loop actually got (on a loaded machine it is less than a core).
TEST(ProcessSampler, CpuPercentReactsToBusyLoop) {
  ProcessSampler sampler;
  sampler.start(20ms);
  std::this_thread::sleep_for(150ms);  // idle
  const size_t idle_count = values(sampler.samples(), "process_cpu_percent").size();
  const auto wall0 = std::chrono::steady_clock::now();
  const int64_t cpu0 = cpu_ns();
  volatile double sink = 0;
  while (std::chrono::steady_clock::now() < wall0 + 400ms) {
    for (int i = 0; i < 1000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  }
  const double actual = 100.0 * static_cast<double>(cpu_ns() - cpu0) /
                        static_cast<double>(std::chrono::nanoseconds(std::chrono::steady_clock::now() - wall0).count());
  sampler.stop();
  const auto cpu = values(sampler.samples(), "process_cpu_percent");
  ASSERT_GT(cpu.size(), idle_count + 3);
  // The first busy sample straddles the switch; the rest lie inside the busy window.
  const std::vector<double> idle(cpu.begin(), cpu.begin() + static_cast<std::ptrdiff_t>(idle_count));
  const std::vector<double> busy(cpu.begin() + static_cast<std::ptrdiff_t>(idle_count) + 1, cpu.end());
  EXPECT_NEAR(mean(busy), actual, 15.0 + 0.25 * actual);
  EXPECT_GT(mean(busy), mean(idle));
}

}  // namespace
}  // namespace ts::collectors

TEST(ProcessSampler, ShortRunStillHasFirstAndLastSample) {
  ts::collectors::ProcessSampler sampler;
  sampler.start(std::chrono::milliseconds(10'000));
  sampler.stop();
  int rss = 0;
  for (const auto& s : sampler.samples()) rss += s.name == "rss_bytes" && s.value > 0;
  EXPECT_EQ(rss, 2);
}
