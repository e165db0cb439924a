#include "distributed/mpi_runtime.h"

#include <cstdlib>
#include <string>

#include "distributed/error.h"
#include "distributed/mpi_check.h"

namespace ts::distributed {

namespace detail {
void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  throw DistError(std::string("MPI call failed: ") + call + ": " + std::string(text, static_cast<size_t>(length)) +
                  " (code " + std::to_string(code) + ", " + file + ":" + std::to_string(line) + ")");
}
}  // namespace detail

bool launched_as_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

int srun_tasks_without_rank() {
  if (launched_as_rank()) return 0;
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");  // set by srun in each task it starts
  if (tasks == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(tasks, &end, 10);
  return end != tasks && *end == '\0' && n > 1 && n <= 1 << 30 ? static_cast<int>(n) : 0;
}

MpiRuntime::MpiRuntime() {
  int initialized = 0;
  TS_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) throw DistError("MPI is already initialised in this process (one MpiRuntime per process)");
  int provided = 0;
  TS_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw DistError("this MPI library does not support MPI_THREAD_MULTIPLE (it provides level " +
                    std::to_string(provided) + "); trainscope's communication thread needs it");
  }
  TS_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  TS_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_.rank));
  TS_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_.size));
  MPI_Comm local = MPI_COMM_NULL;
  TS_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_.rank, MPI_INFO_NULL, &local));
  TS_MPI_CHECK(MPI_Comm_rank(local, &world_.local_rank));
  TS_MPI_CHECK(MPI_Comm_size(local, &world_.local_size));
  TS_MPI_CHECK(MPI_Comm_free(&local));
}

MpiRuntime::~MpiRuntime() { MPI_Finalize(); }

std::string MpiRuntime::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string s(text, static_cast<size_t>(length));
  const auto nl = s.find_first_of("\r\n");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ',' || s.back() == ' ')) s.pop_back();
  return s;
}

void MpiRuntime::abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; if it did, this rank still must not go on
}

}  // namespace ts::distributed
