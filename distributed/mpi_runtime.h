#pragma once
// MPI for this process: whether a launcher (mpirun, srun) started it as one of several ranks,
// MPI's initialisation with the thread level the communication thread needs, and its end.
#include <mpi.h>

#include <string>

namespace ts::distributed {

// Where this process sits among the ranks, as the launcher set it up.
struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // among the ranks on this host
  int local_size = 1;
};

// True when a launcher started this process as an MPI rank: OpenMPI's mpirun
// (OMPI_COMM_WORLD_SIZE), PMIx (PMIX_RANK, srun --mpi=pmix) or PMI-2 (PMI_SIZE, srun --mpi=pmi2).
bool launched_as_rank();

// How many tasks srun started beside this one when it gave them no MPI rank (srun without
// --mpi=pmix where Slurm's MpiDefault is none: SLURM_STEP_NUM_TASKS > 1 but none of the variables
// above), else 0. Each such task would run alone, as a job of its own.
int srun_tasks_without_rank();

// MPI_Init_thread with MPI_THREAD_MULTIPLE (the training thread, the gradients' communication
// thread and the record stream all call MPI) and MPI_Finalize when destroyed. One per process.
class MpiRuntime {
 public:
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  const World& world() const { return world_; }
  // The MPI library's own version line (stored in the run's environment).
  static std::string library_version();
  // Ends every rank of the job now (a rank that cannot go on while the others wait for it).
  [[noreturn]] static void abort_job(int code);

 private:
  World world_;
};

}  // namespace ts::distributed
