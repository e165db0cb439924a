#pragma once
// The machine's measured limits that the roofline sets a step against (docs/formulas.md,
// "Roofline"): single-precision GEMM throughput through the backend's own matrix product (the
// kernel the linear layers use), and the bandwidth of a STREAM-like copy. Measured, not read from
// a data sheet: a VM's cores and memory are whatever its host gives it.
#include <cstdint>

#include "engine/tensor.h"

namespace ts::engine {

struct MachinePeaks {
  int threads = 1;
  double sgemm_gflops = 0;  // the best of several square products, 1e9 FLOP/s
  int64_t sgemm_size = 0;   // their M = N = K
  double copy_gbps = 0;     // the best of several copies; bytes read + written, 1e9 B/s
  int64_t copy_bytes = 0;   // the size of the copied array
};

// Runs the two measurements with `threads` threads for the calling thread's ops (about a second
// in all on a two-core machine). The CPU only: anything else is std::invalid_argument.
MachinePeaks measure_peaks(Device device, int threads);

}  // namespace ts::engine
