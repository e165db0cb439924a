// GoogleTest under mpirun: every rank runs every test; only rank 0 prints the progress, any
// rank's failure makes its exit code (and so mpirun's) non-zero.
#include <gtest/gtest.h>

#include <cstdio>

#include "distributed/mpi_runtime.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ts::distributed::MpiRuntime mpi;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (mpi.world().rank != 0) {
    // Other ranks report failures only (their default printer is replaced by a failure note).
    struct FailurePrinter : ::testing::EmptyTestEventListener {
      int rank;
      explicit FailurePrinter(int r) : rank(r) {}
      void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (r.failed())
          std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank, r.file_name() ? r.file_name() : "?", r.line_number(),
                       r.summary());
      }
    };
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(mpi.world().rank));
  }
  return RUN_ALL_TESTS();
}
