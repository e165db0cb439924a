#include <sstream>
#include <stdexcept>

#include "engine/ops/internal.h"

namespace ts::engine::ops::detail {

void fail(const char* op, const std::string& msg) { throw std::invalid_argument(std::string(op) + ": " + msg); }

void check_defined(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) fail(op, std::string(what) + " is undefined");
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() != b.device())
    fail(op, "tensors on different devices: " + a.device().str() + " and " + b.device().str());
}

void check_4d(const Tensor& t, const char* op, const char* what) {
  check_defined(t, op, what);
  if (t.dim() != 4) fail(op, std::string(what) + " must be 4-D [N, C, H, W], got " + shape_str(t.shape()));
}

std::string shapes(std::initializer_list<const Tensor*> ts) {
  std::string s;
  for (const Tensor* t : ts) {
    if (!s.empty()) s += ", ";
    s += t && t->defined() ? shape_str(t->shape()) : std::string("undefined");
  }
  return s;
}

int64_t bytes_of(std::initializer_list<const Tensor*> ts) {
  int64_t n = 0;
  for (const Tensor* t : ts) n += t != nullptr && t->defined() ? t->numel() : 0;
  return n * static_cast<int64_t>(sizeof(float));
}

int64_t bytes_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.defined() ? t.numel() : 0;
  return n * static_cast<int64_t>(sizeof(float));
}

std::vector<Tensor> NotImplementedBackward::backward(const std::vector<Tensor>&) {
  throw std::logic_error("double backward of " + op_ + " is not implemented");
}

void mark_not_differentiable(const char* op, const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs) {
  if (!thread_context().grad_enabled) return;
  bool any = false;
  for (const Tensor* t : inputs) any |= t && t->defined() && t->requires_grad();
  if (!any) return;
  connect(std::make_shared<NotImplementedBackward>(op), inputs, outputs);
}

}  // namespace ts::engine::ops::detail
