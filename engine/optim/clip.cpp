#include "engine/optim/clip.h"

#include <cmath>
#include <stdexcept>

#include "engine/backend.h"
#include "engine/context.h"

namespace ts::engine::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm > 0)) throw std::invalid_argument("clip_grad_norm: max_norm must be positive");
  NoGradScope no_grad;
  static const auto name = op_name("clip_grad_norm");
  OpScope scope(name);
  double total = 0;
  int64_t bytes = 0;  // every gradient read for the norm; read and written again when scaled
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    total += backend_of(g).sum_squares(g).item();
    bytes += g.numel() * static_cast<int64_t>(sizeof(float));
  }
  const double norm = std::sqrt(total);
  if (norm > max_norm) {
    const auto s = static_cast<float>(max_norm / (norm + 1e-6));
    for (const Tensor& p : params) {
      const Tensor g = p.grad();
      if (g.defined()) backend_of(g).add_inplace(g, g, s - 1.0f);  // g += (s - 1) g: g *= s in place
    }
    bytes *= 3;
  }
  scope.add_work({profiler::WorkClass::memory, 0, bytes});
  return norm;
}

}  // namespace ts::engine::optim
