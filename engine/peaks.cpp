#include "engine/peaks.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "engine/backend.h"
#include "engine/context.h"
#include "engine/random.h"

namespace ts::engine {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The best of `repeats` timings of f (after one untimed call: first-touch pages, JIT kernels).
template <class F>
double best_seconds(int repeats, F&& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

MachinePeaks measure_peaks(Device device, int threads) {
  if (!device.is_cpu()) {
    throw std::invalid_argument("measure_peaks: the machine's peaks are measured on the CPU only, not " + device.str());
  }
  if (threads < 1)
    throw std::invalid_argument("measure_peaks: needs at least one thread, got " + std::to_string(threads));
  struct RestoreThreads {
    int n;
    ~RestoreThreads() { set_op_threads(n); }
  } restore{set_op_threads(threads)};
  NoGradScope no_grad;
  CategoryScope category(vocabulary::Category::workspace);
  MachinePeaks p;
  p.threads = threads;

  // SGEMM: y = x w^T at 1024 (4 MiB a matrix, 2.1 GFLOP): large enough for the kernel's best
  // blocking, small enough to stay about 20 ms a product on two cores.
  p.sgemm_size = 1024;
  const int64_t n = p.sgemm_size;
  Rng rng(7);
  Tensor x = Tensor::empty({n, n}, device), w = Tensor::empty({n, n}, device);
  rng.fill_uniform(x, -1.0f, 1.0f);
  rng.fill_uniform(w, -1.0f, 1.0f);
  Backend& be = backend_for(device);
  const double gemm_s = best_seconds(5, [&] { be.linear_forward(x, w, nullptr); });
  p.sgemm_gflops = 2.0 * static_cast<double>(n * n * n) / gemm_s * 1e-9;

  // Copy: 64 MiB, beyond any cache of this class of machine, split in the threads' static shares
  // (each thread touches first what it copies later). Counted as STREAM counts its copy: the bytes
  // read plus the bytes written. Plain host arrays: a probe, not the run's memory.
  p.copy_bytes = int64_t{64} << 20;
  const int64_t floats = p.copy_bytes / static_cast<int64_t>(sizeof(float));
  const std::unique_ptr<float[]> a(new float[static_cast<size_t>(floats)]), b(new float[static_cast<size_t>(floats)]);
  float* pa = a.get();
  float* pb = b.get();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < floats; ++i) {
    pa[i] = 1.0f;
    pb[i] = 0.0f;
  }
  const double copy_s = best_seconds(5, [&] {
#pragma omp parallel num_threads(threads)
    {
      const int64_t parts = omp_get_num_threads(), me = omp_get_thread_num();
      const int64_t lo = floats * me / parts, hi = floats * (me + 1) / parts;
      std::memcpy(pb + lo, pa + lo, static_cast<size_t>(hi - lo) * sizeof(float));
    }
  });
  p.copy_gbps = 2.0 * static_cast<double>(p.copy_bytes) / copy_s * 1e-9;
  return p;
}

}  // namespace ts::engine
