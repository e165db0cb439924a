#pragma once
// Learning-rate schedules as functions of the step (0-based): constant, step decay, cosine,
// each optionally behind a linear warm-up; and the Transformer's inverse square root
// (Vaswani et al.: base_lr min(s^-0.5, s warmup^-1.5), s = step + 1, its own warm-up).
#include <cstdint>
#include <string>

namespace ts::engine::optim {

struct LrSchedule {
  enum class Kind { constant, step, cosine, inverse_sqrt };
  Kind kind = Kind::constant;
  double base_lr = 0.1;
  int64_t warmup_steps = 0;  // linear ramp from base_lr / warmup_steps
  int64_t step_size = 30;    // step: multiply by gamma every step_size steps
  double gamma = 0.1;
  int64_t total_steps = 0;  // cosine: decays to min_lr at total_steps
  double min_lr = 0;

  double at(int64_t step) const;
  std::string describe() const;
};

}  // namespace ts::engine::optim
