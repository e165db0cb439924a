#pragma once
// Internal to the engine: the CPU backend's one single-precision matrix product, row-major
// C = alpha op(A) op(B) + beta C, which the linear, rnn and attention families call (issue 43),
// and a recorder of the shapes it runs, off by default, that bench/gemm_shapes_bench turns on
// for one training iteration to learn which products a workload runs and how often.
#include <cstdint>
#include <string>
#include <vector>

namespace ts::engine::cpu {

// Who asked for the product: the caller's role, so that a table of shapes reads as the model.
enum class GemmSite : uint8_t {
  linear_forward,           // y = x w^T (+ bias)
  linear_backward_data,     // dx = dy w
  linear_backward_weights,  // dw = dy^T x
  rnn_input,                // every step's input projection at once, x W_ih^T
  rnn_step,                 // one step's recurrent product, h W_hh^T
  rnn_step_backward,        // one step's dh_{t-1} from the gate gradients
  rnn_backward_data,        // dx over all steps
  rnn_backward_weights,     // dW_ih, dW_hh and the bias sums over all steps
  attention_forward,        // per head: scores Q K^T and the context P V
  attention_backward,       // per head: dV, dP, dQ, dK
  other,
};
const char* gemm_site_name(GemmSite site);

// Where the product runs. `team`: on the calling thread's OpenMP team (set_op_threads), the
// library threading it. `calling_thread`: on the calling thread alone, for callers inside their
// own parallel loops (attention's heads).
enum class GemmThreads : uint8_t { team, calling_thread };

// C = alpha op(A) op(B) + beta C, all row-major: op(A) is m x k, op(B) k x n, C m x n; ta / tb
// are 'N' or 'T'; lda, ldb, ldc are the rows' strides of A, B and C as stored. m or n zero does
// nothing; k zero leaves beta C (beta 0: zeros). Throws std::runtime_error naming the shape if
// the library fails.
void sgemm(GemmSite site, char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, GemmThreads threads = GemmThreads::team);

// --- the shape recorder ---
// While on, every sgemm call with m, n > 0 is counted under its shape and site, from every
// thread. Off, a call pays one relaxed atomic load for it.
struct GemmShapeCount {
  GemmSite site = GemmSite::other;
  char ta = 'N', tb = 'N';
  int64_t m = 0, n = 0, k = 0;
  GemmThreads threads = GemmThreads::team;
  int64_t calls = 0;

  double flops_per_call() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
};

// Turns recording on or off and returns the previous setting; what was counted stays.
bool set_gemm_recording(bool on);
// The counts so far, ordered by site, then transposes, then m, n, k.
std::vector<GemmShapeCount> gemm_shape_counts();
void clear_gemm_shape_counts();

// Recording for a scope (counts cleared at its start); the previous setting is put back at its end.
class GemmRecordingScope {
 public:
  GemmRecordingScope() : previous_(set_gemm_recording(true)) { clear_gemm_shape_counts(); }
  ~GemmRecordingScope() { set_gemm_recording(previous_); }
  GemmRecordingScope(const GemmRecordingScope&) = delete;
  GemmRecordingScope& operator=(const GemmRecordingScope&) = delete;

 private:
  bool previous_;
};

}  // namespace ts::engine::cpu
