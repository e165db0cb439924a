#include "distributed/clock_sync.h"

#include <algorithm>

#include "distributed/mpi_check.h"
#include "distributed/stall_watch.h"
#include "vocabulary/clock.h"

namespace ts::distributed {

namespace {

// The exchange on a communicator of its own: no other thread's message can match its receives.
class OwnComm {
 public:
  explicit OwnComm(MPI_Comm parent) { TS_MPI_CHECK(MPI_Comm_dup(parent, &comm_)); }
  ~OwnComm() { MPI_Comm_free(&comm_); }
  OwnComm(const OwnComm&) = delete;
  OwnComm& operator=(const OwnComm&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

std::vector<ClockOffset> measure_clock_offsets(MPI_Comm parent, int pings) {
  constexpr int kTag = 4141;
  int rank = 0, size = 1;
  TS_MPI_CHECK(MPI_Comm_rank(parent, &rank));
  TS_MPI_CHECK(MPI_Comm_size(parent, &size));
  const StallWatch::Call watched("control", "clock sync", "ping-pong with rank 0", rank == 0 ? kEveryRank : 0);
  const OwnComm own(parent);
  const MPI_Comm comm = own.get();
  if (rank != 0) {
    for (int i = 0; i < pings; ++i) {
      char question = 0;
      TS_MPI_CHECK(MPI_Recv(&question, 1, MPI_CHAR, 0, kTag, comm, MPI_STATUS_IGNORE));
      const int64_t answer = vocabulary::now_ns();
      TS_MPI_CHECK(MPI_Send(&answer, 1, MPI_INT64_T, 0, kTag, comm));
    }
    return {};
  }
  std::vector<ClockOffset> offsets(static_cast<size_t>(size));
  offsets[0].at_ns = vocabulary::now_ns();  // rank 0 against itself: 0, exactly
  std::vector<ClockPing> samples(static_cast<size_t>(std::max(pings, 0)));
  for (int peer = 1; peer < size; ++peer) {
    for (auto& s : samples) {
      const char question = 0;
      s.sent_ns = vocabulary::now_ns();
      TS_MPI_CHECK(MPI_Send(&question, 1, MPI_CHAR, peer, kTag, comm));
      TS_MPI_CHECK(MPI_Recv(&s.peer_ns, 1, MPI_INT64_T, peer, kTag, comm, MPI_STATUS_IGNORE));
      s.received_ns = vocabulary::now_ns();
    }
    if (const auto o = vocabulary::estimate_offset(samples)) offsets[static_cast<size_t>(peer)] = *o;
  }
  return offsets;
}

}  // namespace ts::distributed
