#include "engine/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ts::engine::optim {

double LrSchedule::at(int64_t step) const {
  if (kind == Kind::inverse_sqrt) {
    const auto s1 = static_cast<double>(step + 1);
    const auto w = static_cast<double>(std::max<int64_t>(1, warmup_steps));
    return base_lr * std::min(1.0 / std::sqrt(s1), s1 * std::pow(w, -1.5));
  }
  if (warmup_steps > 0 && step < warmup_steps)
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t s = step - warmup_steps;
  switch (kind) {
    case Kind::constant: return base_lr;
    case Kind::step: return base_lr * std::pow(gamma, static_cast<double>(s / std::max<int64_t>(1, step_size)));
    case Kind::inverse_sqrt: break;  // handled above
    case Kind::cosine: {
      const int64_t span = std::max<int64_t>(1, total_steps - warmup_steps);
      const double t = std::min(1.0, static_cast<double>(s) / static_cast<double>(span));
      return min_lr + 0.5 * (base_lr - min_lr) * (1 + std::cos(M_PI * t));
    }
  }
  return base_lr;
}

std::string LrSchedule::describe() const {
  std::ostringstream o;
  switch (kind) {
    case Kind::constant: o << "constant " << base_lr; break;
    case Kind::step: o << "step " << base_lr << " x" << gamma << " every " << step_size; break;
    case Kind::cosine: o << "cosine " << base_lr << "->" << min_lr << " over " << total_steps; break;
    case Kind::inverse_sqrt: o << "inverse sqrt " << base_lr << " x min(s^-0.5, s w^-1.5)"; break;
  }
  if (warmup_steps > 0) o << ", warm-up " << warmup_steps;
  return o.str();
}

}  // namespace ts::engine::optim
