// The CPU backend's one matrix product (engine/cpu/gemm.h): its results against a naive loop
// (transposes, alpha, beta, leading dimensions wider than the rows) and the shape recorder's
// counts (off by default; every call of a recorded scope counted under its shape and site).
#include "engine/cpu/gemm.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "engine/ops.h"
#include "test_util.h"

namespace ts::engine::cpu {
namespace {

using testing::max_rel_diff;
using testing::uniform;

struct Case {
  char ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  int64_t pad;  // added to every leading dimension
};

// C = alpha op(A) op(B) + beta C, row-major, in double.
std::vector<float> naive(const Case& c, const std::vector<float>& a, int64_t lda, const std::vector<float>& b,
                         int64_t ldb, std::vector<float> out, int64_t ldc) {
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const float av = c.ta == 'N' ? a[static_cast<size_t>(i * lda + p)] : a[static_cast<size_t>(p * lda + i)];
        const float bv = c.tb == 'N' ? b[static_cast<size_t>(p * ldb + j)] : b[static_cast<size_t>(j * ldb + p)];
        s += static_cast<double>(av) * bv;
      }
      float& o = out[static_cast<size_t>(i * ldc + j)];
      o = static_cast<float>(c.alpha * s + (c.beta == 0.0f ? 0.0 : static_cast<double>(c.beta) * o));
    }
  }
  return out;
}

void check_case(const Case& c, GemmThreads threads) {
  const int64_t a_rows = c.ta == 'N' ? c.m : c.k, a_cols = c.ta == 'N' ? c.k : c.m;
  const int64_t b_rows = c.tb == 'N' ? c.k : c.n, b_cols = c.tb == 'N' ? c.n : c.k;
  const int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
  const auto a = uniform(a_rows * lda, 1), b = uniform(b_rows * ldb, 2), c0 = uniform(c.m * ldc, 3);
  std::vector<float> got = c0;
  sgemm(GemmSite::other, c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, got.data(), ldc,
        threads);
  EXPECT_LT(max_rel_diff(got, naive(c, a, lda, b, ldb, c0, ldc)), 1e-5)
      << c.ta << c.tb << " " << c.m << "x" << c.n << "x" << c.k << " alpha " << c.alpha << " beta " << c.beta << " pad "
      << c.pad;
}

const std::vector<Case> kCases = {
    {'N', 'N', 7, 5, 3, 1.0f, 0.0f, 0},      {'N', 'T', 33, 17, 65, 1.0f, 1.0f, 0},
    {'T', 'N', 16, 31, 9, 0.5f, 0.0f, 3},    {'T', 'T', 8, 8, 8, -2.0f, 1.0f, 5},
    {'N', 'T', 1, 64, 40, 1.0f, 0.0f, 7},    {'T', 'N', 64, 1, 40, 1.0f, 0.5f, 1},
    {'N', 'N', 130, 70, 90, 0.25f, 1.0f, 4}, {'N', 'N', 4, 6, 0, 1.0f, 0.0f, 2},
    {'T', 'N', 4, 6, 0, 1.0f, 1.0f, 2},
};

TEST(CpuGemm, MatchesNaive) {
  for (const Case& c : kCases) check_case(c, GemmThreads::team);
}

TEST(CpuGemm, OnTheCallingThreadMatchesNaive) {
  for (const Case& c : kCases) check_case(c, GemmThreads::calling_thread);
#pragma omp parallel for
  for (int i = 0; i < 4; ++i) check_case(kCases[static_cast<size_t>(i)], GemmThreads::calling_thread);
}

TEST(CpuGemm, EmptyOutputIsLeftAlone) {
  std::vector<float> c(4, 3.0f);
  sgemm(GemmSite::other, 'N', 'N', 0, 2, 5, 1.0f, nullptr, 5, nullptr, 2, 0.0f, c.data(), 2);
  sgemm(GemmSite::other, 'N', 'N', 2, 0, 5, 1.0f, nullptr, 5, nullptr, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, std::vector<float>(4, 3.0f));
}

int64_t calls_of(const std::vector<GemmShapeCount>& counts, GemmSite site, char ta, char tb, int64_t m, int64_t n,
                 int64_t k) {
  for (const auto& s : counts) {
    if (s.site == site && s.ta == ta && s.tb == tb && s.m == m && s.n == n && s.k == k) return s.calls;
  }
  return 0;
}

TEST(CpuGemmRecorder, OffByDefaultAndCountsWhileOn) {
  clear_gemm_shape_counts();
  std::vector<float> a(12, 1.0f), b(12, 1.0f), c(16, 0.0f);
  sgemm(GemmSite::other, 'N', 'N', 4, 4, 3, 1.0f, a.data(), 3, b.data(), 4, 0.0f, c.data(), 4);
  EXPECT_TRUE(gemm_shape_counts().empty());  // off unless asked for
  {
    GemmRecordingScope rec;
    for (int i = 0; i < 3; ++i) {
      sgemm(GemmSite::other, 'N', 'N', 4, 4, 3, 1.0f, a.data(), 3, b.data(), 4, 0.0f, c.data(), 4);
    }
    sgemm(GemmSite::attention_forward, 'T', 'N', 4, 4, 3, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4,
          GemmThreads::calling_thread);
    sgemm(GemmSite::other, 'N', 'N', 0, 4, 3, 1.0f, a.data(), 3, b.data(), 4, 0.0f, c.data(), 4);  // nothing to do
    const auto counts = gemm_shape_counts();
    ASSERT_EQ(counts.size(), 2u);
    EXPECT_EQ(calls_of(counts, GemmSite::other, 'N', 'N', 4, 4, 3), 3);
    EXPECT_EQ(calls_of(counts, GemmSite::attention_forward, 'T', 'N', 4, 4, 3), 1);
    for (const auto& s : counts) {
      EXPECT_EQ(s.threads, s.site == GemmSite::attention_forward ? GemmThreads::calling_thread : GemmThreads::team);
    }
    EXPECT_DOUBLE_EQ(counts[0].flops_per_call(), 2.0 * 4 * 4 * 3);
  }
  sgemm(GemmSite::other, 'N', 'N', 4, 4, 3, 1.0f, a.data(), 3, b.data(), 4, 0.0f, c.data(), 4);
  EXPECT_EQ(calls_of(gemm_shape_counts(), GemmSite::other, 'N', 'N', 4, 4, 3), 3);  // off again, counts kept
  EXPECT_FALSE(set_gemm_recording(false));
  EXPECT_STREQ(gemm_site_name(GemmSite::linear_backward_weights), "linear_backward_weights");
}

TEST(CpuGemmRecorder, CountsALinearLayersThreeProducts) {
  // y = x w^T + b: forward [6, 5] x [3, 5]^T; backward data dy w, weights dy^T x.
  const Tensor x = testing::rand_tensor({6, 5}, 1), w = testing::rand_tensor({3, 5}, 2),
               b = testing::rand_tensor({3}, 3);
  GemmRecordingScope rec;
  ops::sum(ops::linear(x, w, b)).backward();
  const auto counts = gemm_shape_counts();
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_EQ(calls_of(counts, GemmSite::linear_forward, 'N', 'T', 6, 3, 5), 1);
  EXPECT_EQ(calls_of(counts, GemmSite::linear_backward_data, 'N', 'N', 6, 5, 3), 1);
  EXPECT_EQ(calls_of(counts, GemmSite::linear_backward_weights, 'T', 'N', 3, 5, 6), 1);
}

TEST(CpuGemmRecorder, CountsFromSeveralThreads) {
  GemmRecordingScope rec;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      std::vector<float> a(6, 1.0f), b(6, 1.0f), c(4, 0.0f);
      for (int i = 0; i < 100; ++i) {
        sgemm(GemmSite::rnn_step, 'N', 'T', 2, 2, 3, 1.0f, a.data(), 3, b.data(), 3, 0.0f, c.data(), 2);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls_of(gemm_shape_counts(), GemmSite::rnn_step, 'N', 'T', 2, 2, 3), 400);
}

}  // namespace
}  // namespace ts::engine::cpu
