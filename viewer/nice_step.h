#pragma once
// Axis and ruler steps that read well: 1, 2 or 5 times a power of ten.
#include <cmath>

namespace ts::viewer {

// The smallest such step at least `raw` (> 0; 1 otherwise).
inline double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0})
    if (m * power >= raw) return m * power;
  return 10 * power;
}

}  // namespace ts::viewer
