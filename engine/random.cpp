#include "engine/random.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/backend.h"

namespace ts::engine {

double Rng::uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

double Rng::normal() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  double u1 = 0;
  while (u1 <= 0) u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2 * M_PI * u2);
  have_spare_ = true;
  return r * std::cos(2 * M_PI * u2);
}

int64_t Rng::integer(int64_t n) {
  if (n <= 0) throw std::invalid_argument("Rng::integer needs n > 0");
  return static_cast<int64_t>(gen_() % static_cast<uint64_t>(n));
}

namespace {

// Draws on the host in logical element order (the same values on every device and in every
// layout: a packed weight gets what a plain one would), then fills `t`.
template <class Draw>
void fill_with(const Tensor& t, Draw draw) {
  if (t.device().is_meta()) return;
  if (t.device().is_cpu() && t.layout().is_plain()) {
    float* p = t.data();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = draw();
    return;
  }
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (auto& x : v) x = draw();
  backend_of(t).copy(Tensor::from_vector(t.shape(), v, t.device()), t);
}

}  // namespace

void Rng::fill_uniform(const Tensor& t, float lo, float hi) {
  fill_with(t, [&] { return static_cast<float>(uniform(lo, hi)); });
}

void Rng::fill_normal(const Tensor& t, float mean, float stddev) {
  fill_with(t, [&] { return static_cast<float>(mean + stddev * normal()); });
}

}  // namespace ts::engine
