#pragma once
// Dropout's mask, shared by cpu/pointwise.cpp and cuda/pointwise.cu: element i is kept (scaled by
// 1 / (1 - p)) or dropped by a counter-based draw that depends only on (seed, i), so every
// backend, thread count and launch shape draws the same mask.
#include <cstdint>

#include "engine/numerics/host_device.h"

namespace ts::engine::numerics {

// splitmix64 (Steele, Lea and Flood 2014).
TS_HD uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The mask's value at element i: `keep` or 0. `base` is splitmix64(seed); 24 random bits make a
// uniform float in [0, 1) that is exact on every backend.
TS_HD float dropout_value(uint64_t base, int64_t i, float p, float keep) {
  const float u = static_cast<float>(splitmix64(base + static_cast<uint64_t>(i)) >> 40) * (1.0f / 16777216.0f);
  return u >= p ? keep : 0.0f;
}

}  // namespace ts::engine::numerics
