#pragma once
// Internal to engine/cpu/: what the CPU backend's family files (cpu/<family>.cpp) share: the
// argument checks every kernel starts with and the element loop they run in.
#include <stdexcept>
#include <string>

#include "engine/cpu/cpu_backend.h"

namespace ts::engine::cpu {

// Below this many elements a loop runs on the calling thread (OpenMP's start-up costs more).
inline constexpr int64_t kParallelThreshold = 1 << 15;

[[noreturn]] inline void fail(const char* op, const std::string& msg) {
  throw std::invalid_argument(std::string(op) + ": " + msg);
}

// `what` names the argument in the message.
inline void check_cpu(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) fail(op, std::string(what) + " is undefined");
  if (!t.device().is_cpu()) fail(op, std::string(what) + " is on " + t.device().str());
}

inline void check_cpu(const Tensor& t, const char* op) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": undefined tensor");
  if (!t.device().is_cpu()) throw std::invalid_argument(std::string(op) + ": tensor on " + t.device().str());
}

inline void check_same(const Tensor& a, const Tensor& b, const char* op) {
  check_cpu(a, op);
  check_cpu(b, op);
  if (a.shape() != b.shape()) {
    throw std::invalid_argument(std::string(op) + ": shapes differ: " + shape_str(a.shape()) + " vs " +
                                shape_str(b.shape()));
  }
}

template <class F>
void parallel_for(int64_t n, F&& f) {
#pragma omp parallel for simd if (n > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// Defined, on the CPU, plain and of rank `rank` (0: any).
inline void check_plain(const Tensor& t, const char* op, const char* what, int64_t rank) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": " + what + " is undefined");
  if (!t.device().is_cpu()) throw std::invalid_argument(std::string(op) + ": " + what + " on " + t.device().str());
  if (!t.layout().is_plain() || (rank > 0 && t.dim() != rank)) {
    throw std::invalid_argument(std::string(op) + ": " + what + " must be plain " + std::to_string(rank) + "-D, got " +
                                shape_str(t.shape()) + " " + t.layout().str());
  }
}

inline Tensor plain(CpuBackend& b, const Tensor& t) {
  return t.layout().is_plain() ? t : b.to_layout(t, Layout::plain());
}

// Brings `x` to `layout` (shares storage when it already is there).
inline Tensor as_layout(CpuBackend& b, const Tensor& x, const Layout& layout) {
  return x.layout() == layout ? x : b.to_layout(x, layout);
}

}  // namespace ts::engine::cpu
