#pragma once
// TS_HD marks the shared numerics (engine/numerics/) as callable from host code and from CUDA
// kernels: the CPU backend and the kernels then compile one definition of each formula, so they
// read the same cells, draw the same masks and round the same way.
#ifdef __CUDACC__
#define TS_HD __host__ __device__ __forceinline__
#else
#define TS_HD inline
#endif

namespace ts::engine::numerics {

// Finite (not NaN, not infinite), without <cmath>'s host-only overloads.
TS_HD bool is_finite(float v) { return v - v == 0.0f; }

}  // namespace ts::engine::numerics
