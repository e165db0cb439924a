#pragma once
// The ctc family's log-space sums, compiled by the CPU backend (cpu/ctc.cpp) and the kernels
// (cuda/ctc.cu), so that both recursions add their terms alike.
#include <cmath>

#include "engine/numerics/host_device.h"

namespace ts::engine::numerics {

// log(e^a + e^b).
TS_HD double log_add(double a, double b) {
  if (a < b) {
    const double t = a;
    a = b;
    b = t;
  }
  if (b == -INFINITY) return a;
  return a + ::log1p(::exp(b - a));
}

// log(e^a + e^b + e^c) with the largest term factored out: at most two exp and one log (the
// recursions' inner loop, so no transcendental is spent on exp(0) or exp(-inf)).
TS_HD double log_add3(double a, double b, double c) {
  double t;
  if (a < b) {
    t = a;
    a = b;
    b = t;
  }
  if (a < c) {
    t = a;
    a = c;
    c = t;
  }
  if (a == -INFINITY) return -INFINITY;
  double sum = 1.0;
  if (b != -INFINITY) sum += ::exp(b - a);
  if (c != -INFINITY) sum += ::exp(c - a);
  return a + ::log(sum);
}

}  // namespace ts::engine::numerics
