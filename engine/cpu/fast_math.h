#pragma once
// exp, sigmoid and tanh in plain float arithmetic, so that the loops calling them vectorize
// (libm's expf/tanhf do not without -ffast-math): the recurrent gate kernels (cpu/rnn.cpp) and
// additive attention (cpu/attention.cpp). Internal to the CPU backend.
#include <bit>
#include <cmath>
#include <cstdint>

namespace ts::engine::cpu {

// c ? a : b on the bits. GCC does not if-convert a float select that feeds more arithmetic under
// -ftrapping-math (the default), which would leave the calling loops scalar.
inline float select(bool c, float a, float b) {
  const int32_t m = -static_cast<int32_t>(c);
  return std::bit_cast<float>((std::bit_cast<int32_t>(a) & m) | (std::bit_cast<int32_t>(b) & ~m));
}

// Cephes' polynomial on r = x - n ln2, scaled by 2^n through the exponent bits. Relative error
// below 1e-7; sigmoid and tanh built on it below 3e-7.
inline float fast_exp(float x) {
  x = select(x < -87.0f, -87.0f, x);
  x = select(x > 88.0f, 88.0f, x);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds x log2(e) to an integer n
  const float t = x * 1.44269504088896341f + kRound;
  const float n = t - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n << 23, in unsigned arithmetic: for a NaN x the bits are garbage, and signed overflow would be UB.
  const uint32_t shift = (std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kRound)) << 23;
  // A NaN stays NaN (the exponent arithmetic would turn it into a number): divergence must show.
  return select(x != x, x, std::bit_cast<float>(std::bit_cast<uint32_t>(p) + shift));
}

inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

// 1 - 2 / (e^2x + 1), and near 0, where that form loses relative precision, Cephes' tanhf
// polynomial. Relative error below 3e-7 everywhere.
inline float fast_tanh(float x) {
  const float big = 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
  const float z = x * x;
  const float small =
      ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
       3.33332819422e-1f) *
          z * x +
      x;
  return select(std::abs(x) < 0.625f, small, big);
}

}  // namespace ts::engine::cpu
