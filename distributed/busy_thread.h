#pragma once
// A thread that keeps a core busy and counts its work: the stand-in for a rank's compute beside
// its communication, in the benchmarks that measure what the one takes from the other (the
// collectives sweep's calls, a parameter server's messages).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace ts::distributed {

class BusyThread {
 public:
  BusyThread() : thread_([this] { spin(); }) {}
  ~BusyThread() {
    quit_.store(true);
    thread_.join();
  }
  BusyThread(const BusyThread&) = delete;
  BusyThread& operator=(const BusyThread&) = delete;
  uint64_t work() const { return work_.load(std::memory_order_relaxed); }

 private:
  void spin() {
    uint64_t x = 1;
    while (!quit_.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 4096; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      work_.fetch_add(1, std::memory_order_relaxed);
    }
    sink_ = x;  // the loop's result is kept: it cannot be optimised away
  }
  std::atomic<bool> quit_{false};
  std::atomic<uint64_t> work_{0};
  volatile uint64_t sink_ = 0;
  std::thread thread_;
};

// The busy thread's work per second over `seconds` of `what` (a function run meanwhile).
template <class F>
double busy_rate(const BusyThread& busy, F&& what, double& seconds) {
  const uint64_t w0 = busy.work();
  const auto t0 = std::chrono::steady_clock::now();
  what();
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return seconds > 0 ? static_cast<double>(busy.work() - w0) / seconds : 0;
}

}  // namespace ts::distributed
