#pragma once
// Parameters held and updated elsewhere (the parameter server's worker, distributed/ps/worker.h), for
// a workload whose learners update asynchronously from threads of their own (a3c): each
// learner reads the newest values into its own copy of the network, computes a gradient on
// them, and sends it; the service's optimizer (the workload's recipe, on the servers) applies
// it. The versions a read returns go back with the gradient, so that the service can tell how
// stale the gradient was when it arrived.
#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace ts::engine::optim {

class ParameterService {
 public:
  using Versions = std::vector<int64_t>;
  virtual ~ParameterService() = default;
  // Copies the newest values of gradient group `group` into `into` (one tensor per parameter of
  // the group, laid out as the group's). Thread-safe; waits only for a value never received.
  virtual Versions read(int group, const std::vector<Tensor>& into) = 0;
  // Sends one update of group `group`: `gradients` (one per parameter of the group, laid out as
  // it; undefined: no gradient), computed on the values a read returned `versions` for, already
  // clipped as the workload's step would. Thread-safe; returns once the update is queued, first
  // waiting while the updates queued before it hold more than a bounded amount of memory.
  virtual void push(int group, const std::vector<Tensor>& gradients, const Versions& versions) = 0;
};

}  // namespace ts::engine::optim
