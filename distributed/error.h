#pragma once
// Errors of the distributed layer: a failed MPI or NCCL call (with the call, the library's
// message and where), a rank that disagrees with the others, a bad launch.
#include <stdexcept>

namespace ts::distributed {

class DistError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ts::distributed
