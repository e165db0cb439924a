#include "cli/openmp_waiting.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "fmt/format.h"

namespace ts::cli {

void settle_openmp_waiting(int argc, char** argv) {
  if (argc < 2) return;
  const std::string_view command = argv[1];
  // Only what trains or times: the other commands run no parallel region worth a second start.
  if (command != "run" && command != "suite" && command != "bench") return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (::setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // Still here: the exec failed. Take the variable back so the record says what was in force.
  const int error = errno;
  ::unsetenv("GOMP_SPINCOUNT");
  fmt::print(stderr,
             "trainscope: could not restart with GOMP_SPINCOUNT={} ({}); OpenMP threads keep libgomp's "
             "default spinning, which is slow on a busy machine\n",
             kOpenMpSpinCount, std::strerror(error));
}

}  // namespace ts::cli
