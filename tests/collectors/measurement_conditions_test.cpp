// The /proc and /sys parsers on fixed text, and the conditions two readings make
// (collectors/process_sampler.h, collectors/measurement_conditions.h).
#include "collectors/measurement_conditions.h"

#include <gtest/gtest.h>

namespace ts::collectors {
namespace {

// /proc/stat of a 2-core machine (Linux 5.x: ten fields).
constexpr const char* kProcStat = "cpu  4705 356 584 3699176 23060 0 277 120 0 0\n"
                                  "cpu0 1393 280 283 1849823 10800 0 216 60 0 0\n"
                                  "cpu1 3312 76 301 1849353 12260 0 61 60 0 0\n"
                                  "intr 114930548 113199788 3 0 5 263 0 4 [...]\n";

TEST(CollectorParsing, ProcStatFirstLine) {
  const SystemTicks t = parse_proc_stat(kProcStat);
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(t.total, 4705 + 356 + 584 + 3699176 + 23060 + 0 + 277 + 120);  // guest time is in user already
  EXPECT_EQ(t.busy, t.total - 3699176 - 23060);                            // idle and iowait are not busy
  EXPECT_EQ(t.steal, 120);
}

TEST(CollectorParsing, ProcStatOldKernelAndGarbage) {
  const SystemTicks old = parse_proc_stat("cpu  10 0 5 85\n");  // before iowait, irq and steal
  ASSERT_TRUE(old.ok);
  EXPECT_EQ(old.total, 100);
  EXPECT_EQ(old.busy, 15);
  EXPECT_EQ(old.steal, 0);
  EXPECT_FALSE(parse_proc_stat("").ok);
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5\n").ok);  // a core's line is not the sum
  EXPECT_FALSE(parse_proc_stat("cpu  1 2\n").ok);
  EXPECT_FALSE(parse_proc_stat("intr 1 2 3 4 5\ncpu 1 2 3 4\n").ok);
}

TEST(CollectorParsing, LoadAverageAndFrequency) {
  EXPECT_DOUBLE_EQ(*parse_load_average("5.12 4.80 3.01 7/412 12345\n"), 5.12);
  EXPECT_DOUBLE_EQ(*parse_load_average("0.00 0.01 0.05 1/100 1\n"), 0.0);
  EXPECT_FALSE(parse_load_average(""));
  EXPECT_FALSE(parse_load_average("load"));
  EXPECT_DOUBLE_EQ(*parse_frequency_khz("2394453\n"), 2394453.0);
  EXPECT_FALSE(parse_frequency_khz(""));
  EXPECT_FALSE(parse_frequency_khz("<unknown>\n"));
  EXPECT_FALSE(parse_frequency_khz("0\n"));  // no clock is 0 Hz: unreadable, not invented
}

CpuReading reading(int64_t t_s, double cpu_s, int64_t busy, int64_t steal, int64_t total, double load) {
  CpuReading r;
  r.t_ns = t_s * 1'000'000'000;
  r.process_cpu_ns = static_cast<int64_t>(cpu_s * 1e9);
  r.system = {busy, steal, total, true};
  r.load = load;
  r.online_cores = 2;
  return r;
}

// Ten seconds on 2 cores (2,000 ticks): the run took 8 CPU-seconds of the 20 its 2 threads asked
// for, the machine was busy 1,800 ticks of which 100 were stolen.
TEST(CollectorParsing, ConditionsBetweenTwoReadings) {
  const CpuReading start = reading(0, 0, 0, 0, 0, 4.0);
  const CpuReading from = reading(10, 1, 1000, 0, 4000, 4.5);
  CpuReading to = reading(20, 9, 2800, 100, 6000, 5.5);
  to.mhz = 2400;
  const auto c = conditions_between(start, from, to, 2);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->window_s, 10);
  EXPECT_DOUBLE_EQ(c->process_cores, 0.8);
  EXPECT_DOUBLE_EQ(c->cpu_got_of_asked_percent, 40);
  EXPECT_DOUBLE_EQ(*c->steal_percent, 5);
  EXPECT_NEAR(*c->other_processes_cores, (1800.0 - 100.0) / 2000.0 * 2 - 0.8, 1e-12);
  EXPECT_DOUBLE_EQ(*c->load_start, 4.0);  // the run's start, not the window's
  EXPECT_DOUBLE_EQ(*c->load_end, 5.5);
  EXPECT_DOUBLE_EQ(*c->frequency_mhz, 2400);
}

TEST(CollectorParsing, ConditionsLeaveUnreadableUnset) {
  CpuReading from = reading(0, 0, 0, 0, 0, 1), to = reading(1, 0.5, 0, 0, 0, 1);
  from.system.ok = false;
  from.load.reset();
  auto c = conditions_between(from, from, to, 1);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->other_processes_cores);
  EXPECT_FALSE(c->steal_percent);
  EXPECT_FALSE(c->load_start);
  EXPECT_FALSE(c->frequency_mhz);
  EXPECT_FALSE(conditions_between(to, to, to, 1));  // no window
  to.process_cpu_ns = -1;
  EXPECT_FALSE(conditions_between(from, from, to, 1));
}

// A live reading: whatever the machine is doing, it is self-consistent.
TEST(CollectorParsing, LiveReadingIsConsistent) {
  const CpuReading a = read_cpu();
  volatile double sink = 0;
  for (int i = 0; i < 2'000'000; ++i) sink = sink + i;
  const CpuReading b = read_cpu();
  EXPECT_GE(a.online_cores, 1);
  EXPECT_GE(a.process_cpu_ns, 0);
  EXPECT_GE(b.process_cpu_ns, a.process_cpu_ns);
  if (a.system.ok && b.system.ok) {
    EXPECT_GE(b.system.total, a.system.total);
  }
  if (a.mhz) {
    EXPECT_GT(*a.mhz, 0);
  }
  const auto c = conditions_between(a, a, b, 1);
  ASSERT_TRUE(c);
  EXPECT_GE(c->process_cores, 0);
  if (c->other_processes_cores) {
    EXPECT_GE(*c->other_processes_cores, 0);
  }
}

}  // namespace
}  // namespace ts::collectors
