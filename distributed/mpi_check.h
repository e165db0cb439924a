#pragma once
// Every MPI return code goes through TS_MPI_CHECK: a failure throws DistError naming the call,
// MPI's message and the source line. (The communicators set MPI_ERRORS_RETURN, so a failure
// reaches here instead of aborting the process.)
#include <mpi.h>

namespace ts::distributed::detail {
[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);
inline void check_mpi(int code, const char* call, const char* file, int line) {
  if (code != MPI_SUCCESS) throw_mpi_error(code, call, file, line);
}
}  // namespace ts::distributed::detail

#define TS_MPI_CHECK(call) ::ts::distributed::detail::check_mpi((call), #call, __FILE__, __LINE__)
