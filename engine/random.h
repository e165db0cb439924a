#pragma once
// Seeded random numbers for initialisation and synthetic data: the same seed gives the same
// model and the same batches on every machine (std::mt19937_64 and our own transforms, not
// the standard distributions, whose output differs between standard libraries).
#include <cstdint>
#include <random>

#include "engine/tensor.h"

namespace ts::engine {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform();  // [0, 1)
  double uniform(double lo, double hi);
  double normal();             // Box-Muller, standard normal
  int64_t integer(int64_t n);  // [0, n)
  uint64_t next() { return gen_(); }

  void fill_uniform(const Tensor& t, float lo, float hi);  // plain tensors, any device
  void fill_normal(const Tensor& t, float mean, float stddev);

 private:
  std::mt19937_64 gen_;
  bool have_spare_ = false;
  double spare_ = 0;
};

}  // namespace ts::engine
