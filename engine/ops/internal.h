#pragma once
// Shared pieces of the op wrappers: argument checks, the node recorded by backward pieces that
// have no backward of their own yet, and the internal ops that make linear/sum twice
// differentiable.
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/context.h"
#include "engine/ops.h"

namespace ts::engine::ops::detail {

[[noreturn]] void fail(const char* op, const std::string& msg);
// Defined, and not on the meta device unless allowed.
void check_defined(const Tensor& t, const char* op, const char* what);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
// Defined and 4-D [N, C, H, W] (conv, pool).
void check_4d(const Tensor& t, const char* op, const char* what);
std::string shapes(std::initializer_list<const Tensor*> ts);

// The work an op declares for the roofline (context.h's OpWork; docs/formulas.md, "Roofline").
// Bytes count the tensors' logical fp32 elements, undefined ones as none: each input read once,
// each output written once (a blocked layout's padding is not work).
int64_t bytes_of(std::initializer_list<const Tensor*> ts);
int64_t bytes_of(const std::vector<Tensor>& ts);
inline OpWork memory_work(std::initializer_list<const Tensor*> ts, int64_t flops = 0) {
  return {profiler::WorkClass::memory, flops, bytes_of(ts)};
}
inline OpWork reorder_work(int64_t bytes) { return {profiler::WorkClass::reorder, 0, bytes}; }
inline OpWork compute_work(int64_t flops, int64_t bytes) { return {profiler::WorkClass::compute, flops, bytes}; }
// Real work the roofline does not model (CTC's recursions, RoI sampling): time, and the bytes.
inline OpWork other_work(int64_t bytes) { return {profiler::WorkClass::other, 0, bytes}; }

// A backward piece without a backward of its own: recorded when grad mode is on so that a
// second backward through it fails loudly instead of silently dropping gradient.
struct NotImplementedBackward : Node {
  explicit NotImplementedBackward(std::string op) : op_(std::move(op)) {}
  std::vector<Tensor> backward(const std::vector<Tensor>&) override;
  std::string name() const override { return op_ + "Backward"; }

 private:
  std::string op_;
};
void mark_not_differentiable(const char* op, const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs);

// [1] -> `shape` filled with the scalar (sum's backward); its own backward is sum.
Tensor expand_scalar(const Tensor& g, const Shape& shape, const Layout& layout);
// dx = dy w ([N, O] x [O, I]); and (dy^T x, sum_n dy): both differentiable.
Tensor linear_backward_data(const Tensor& dy, const Tensor& w);
WeightGrads linear_backward_weights(const Tensor& x, const Tensor& dy, bool bias);

}  // namespace ts::engine::ops::detail

namespace ts::engine::ops {

// Every op file checks its arguments with these.
using detail::bytes_of;
using detail::check_4d;
using detail::check_defined;
using detail::check_same_device;
using detail::compute_work;
using detail::fail;
using detail::mark_not_differentiable;
using detail::memory_work;
using detail::other_work;
using detail::reorder_work;

}  // namespace ts::engine::ops
