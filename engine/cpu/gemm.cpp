// The CPU backend's one matrix product (gemm.h): oneDNN's sgemm, and the shape recorder.
//
// Why sgemm and not oneDNN primitives: primitives are created per shape, and the sequence
// workloads change the row count (tokens per batch) at every step, which made primitive creation
// dominate their run time when linear layers ran on inner-product primitives. Inside a parallel
// region (GemmThreads::calling_thread) oneDNN's sgemm runs on the calling thread by itself.
#include "engine/cpu/gemm.h"

#include <dnnl.h>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

namespace ts::engine::cpu {

namespace {

std::atomic<bool> g_recording{false};

using ShapeKey = std::tuple<GemmSite, char, char, int64_t, int64_t, int64_t, GemmThreads>;

struct Recorder {
  std::mutex mu;
  std::map<ShapeKey, int64_t> counts;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

void record(GemmSite site, char ta, char tb, int64_t m, int64_t n, int64_t k, GemmThreads threads) {
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mu);
  ++r.counts[ShapeKey{site, ta, tb, m, n, k, threads}];
}

bool is_rnn(GemmSite site) {
  return site == GemmSite::rnn_input || site == GemmSite::rnn_step || site == GemmSite::rnn_step_backward ||
         site == GemmSite::rnn_backward_data || site == GemmSite::rnn_backward_weights;
}

}  // namespace

const char* gemm_site_name(GemmSite site) {
  switch (site) {
    case GemmSite::linear_forward: return "linear_forward";
    case GemmSite::linear_backward_data: return "linear_backward_data";
    case GemmSite::linear_backward_weights: return "linear_backward_weights";
    case GemmSite::rnn_input: return "rnn_input";
    case GemmSite::rnn_step: return "rnn_step";
    case GemmSite::rnn_step_backward: return "rnn_step_backward";
    case GemmSite::rnn_backward_data: return "rnn_backward_data";
    case GemmSite::rnn_backward_weights: return "rnn_backward_weights";
    case GemmSite::attention_forward: return "attention_forward";
    case GemmSite::attention_backward: return "attention_backward";
    case GemmSite::other: break;
  }
  return "other";
}

void sgemm(GemmSite site, char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, GemmThreads threads) {
  if (m == 0 || n == 0) return;
  if (g_recording.load(std::memory_order_relaxed)) record(site, ta, tb, m, n, k, threads);
  if (k == 0) {  // sgemm may not touch C when k is 0; the product is then beta C
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    }
    return;
  }
  if (dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) != dnnl_success) {
    throw std::runtime_error(std::string(is_rnn(site) ? "rnn: " : "") + "dnnl_sgemm failed (" + std::to_string(m) +
                             "x" + std::to_string(n) + "x" + std::to_string(k) + ")");
  }
}

bool set_gemm_recording(bool on) { return g_recording.exchange(on); }

std::vector<GemmShapeCount> gemm_shape_counts() {
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mu);
  std::vector<GemmShapeCount> out;
  out.reserve(r.counts.size());
  for (const auto& [key, calls] : r.counts) {
    GemmShapeCount s;
    std::tie(s.site, s.ta, s.tb, s.m, s.n, s.k, s.threads) = key;
    s.calls = calls;
    out.push_back(s);
  }
  return out;
}

void clear_gemm_shape_counts() {
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mu);
  r.counts.clear();
}

}  // namespace ts::engine::cpu
