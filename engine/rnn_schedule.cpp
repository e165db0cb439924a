#include "engine/rnn_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ts::engine::rnn {

void check_tensor(const Tensor& t, const char* op, const char* what, const Shape& shape, Device device) {
  if (t.device() != device) {
    throw std::invalid_argument(std::string(op) + ": " + what + " on " + t.device().str() + ", expected " +
                                device.str());
  }
  if (!t.layout().is_plain() || t.shape() != shape) {
    throw std::invalid_argument(std::string(op) + ": " + what + " must be plain " + shape_str(shape) + ", got " +
                                shape_str(t.shape()) + " " + t.layout().str());
  }
}

Dims check_args(const Backend::RnnArgs& a, const char* op, Device device, bool lengths_on_cpu_ok) {
  if (!a.x.defined() || !a.w_ih.defined() || !a.w_hh.defined()) {
    throw std::invalid_argument(std::string(op) + ": x, w_ih and w_hh are required");
  }
  if (a.x.dim() != 3 || a.w_hh.dim() != 2 || a.w_ih.dim() != 2) {
    throw std::invalid_argument(std::string(op) + ": x [T, B, I], w_ih [G H, I] and w_hh [G H, H] expected, got " +
                                shape_str(a.x.shape()) + ", " + shape_str(a.w_ih.shape()) + ", " +
                                shape_str(a.w_hh.shape()));
  }
  Dims d{};
  d.lstm = a.cell == Backend::RnnCell::lstm;
  d.G = d.lstm ? 4 : 3;
  d.T = a.x.size(0);
  d.B = a.x.size(1);
  d.I = a.x.size(2);
  d.H = a.w_hh.size(1);
  check_tensor(a.x, op, "x", a.x.shape(), device);
  check_tensor(a.w_ih, op, "w_ih", {d.gh(), d.I}, device);
  check_tensor(a.w_hh, op, "w_hh", {d.gh(), d.H}, device);
  if (a.b_ih.defined()) check_tensor(a.b_ih, op, "b_ih", {d.gh()}, device);
  if (a.b_hh.defined()) check_tensor(a.b_hh, op, "b_hh", {d.gh()}, device);
  if (a.h0.defined()) check_tensor(a.h0, op, "h0", {d.B, d.H}, device);
  if (a.c0.defined()) {
    if (!d.lstm) throw std::invalid_argument(std::string(op) + ": a GRU has no c0");
    check_tensor(a.c0, op, "c0", {d.B, d.H}, device);
  }
  if (a.lengths.defined()) {
    const bool cpu = lengths_on_cpu_ok && a.lengths.device().is_cpu();
    check_tensor(a.lengths, op, "lengths", {d.B}, cpu ? Device::cpu() : device);
  }
  return d;
}

Schedule make_schedule(const float* lengths, int64_t T, int64_t B, const char* op) {
  Schedule s;
  s.len.assign(static_cast<size_t>(B), T);
  if (lengths) {
    for (int64_t b = 0; b < B; ++b) {
      const float v = lengths[b];
      if (!(v >= 0.0f && v <= static_cast<float>(T)) || v != std::floor(v)) {
        throw std::invalid_argument(std::string(op) + ": lengths[" + std::to_string(b) + "] = " + std::to_string(v) +
                                    " is not an integer in [0, " + std::to_string(T) + "]");
      }
      s.len[static_cast<size_t>(b)] = static_cast<int64_t>(v);
      s.dense = s.dense && s.len[static_cast<size_t>(b)] == T;
    }
  }
  s.perm.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) s.perm[static_cast<size_t>(b)] = b;
  std::stable_sort(s.perm.begin(), s.perm.end(),
                   [&](int64_t a, int64_t b) { return s.len[static_cast<size_t>(a)] > s.len[static_cast<size_t>(b)]; });
  s.max_len = B > 0 ? s.len[static_cast<size_t>(s.perm[0])] : 0;
  s.active.assign(static_cast<size_t>(s.max_len), 0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < s.len[static_cast<size_t>(b)]; ++t) ++s.active[static_cast<size_t>(t)];
  }
  s.offset.assign(static_cast<size_t>(s.max_len) + 1, 0);
  for (int64_t t = 0; t < s.max_len; ++t) {
    s.offset[static_cast<size_t>(t) + 1] = s.offset[static_cast<size_t>(t)] + s.active[static_cast<size_t>(t)];
  }
  return s;
}

}  // namespace ts::engine::rnn
