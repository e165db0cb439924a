// Deep Speech 2's front end: the spectrogram (our own DFT, 20 ms windows every 10 ms, 161 bins)
// of 10 s of 16 kHz audio. The counter ms_per_audio_second is what one second of speech costs
// the data phase (about 1 ms of one core, measured when the front end was written).
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
  ts::workloads::spectrogram(x);   // the twiddle tables, made once
  for (auto _ : state) benchmark::DoNotOptimize(ts::workloads::spectrogram(x));
  // CPU seconds / (iterations x value): with value kSeconds / 1000, milliseconds per audio second.
  state.counters["ms_per_audio_second"] = benchmark::Counter(
      static_cast<double>(kSeconds) / 1e3, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(state.iterations() * kSeconds);   // audio seconds per second
}
BENCHMARK(BM_Spectrogram)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
