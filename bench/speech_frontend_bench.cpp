// Deep Speech 2's front end: the spectrogram (our own DFT, 20 ms windows every 10 ms, 161 bins)
// of 10 s of 16 kHz audio. The counter audio_seconds is the rate in seconds of audio per second
// of CPU (about 1,200/s on the 2-core EPYC: 0.8 ms of one core per second of speech).
#include <benchmark/benchmark.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "workloads/data/speech_data.h"

namespace {

void BM_Spectrogram(benchmark::State& state) {
  constexpr int64_t kRate = 16000, kSeconds = 10;
  std::vector<float> x(static_cast<size_t>(kRate * kSeconds));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(0.5 * std::sin(2 * std::numbers::pi * 700.0 * static_cast<double>(i) / kRate));
  }
  ts::workloads::spectrogram(x);  // the twiddle tables, made once
  for (auto _ : state) benchmark::DoNotOptimize(ts::workloads::spectrogram(x));
  // Seconds of audio per second of CPU: its inverse is what one second of speech costs.
  state.counters["audio_seconds"] = benchmark::Counter(kSeconds, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Spectrogram)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
