#include "distributed/clock_sync.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "distributed/mpi_check.h"
#include "distributed/stall_watch.h"
#include "vocabulary/clock.h"

namespace ts::distributed {

std::optional<ClockOffset> estimate_offset(std::span<const ClockPing> pings) {
  if (pings.empty()) return std::nullopt;
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const ClockPing* fastest = nullptr;
  for (const ClockPing& p : pings) {
    if (p.received_ns < p.sent_ns) return std::nullopt;
    // The peer read its clock at some reference instant in [sent, received].
    lo = std::max(lo, p.peer_ns - p.received_ns);
    hi = std::min(hi, p.peer_ns - p.sent_ns);
    if (fastest == nullptr || p.round_trip_ns() < fastest->round_trip_ns()) fastest = &p;
  }
  ClockOffset o;
  o.pings = static_cast<int>(pings.size());
  o.min_round_trip_ns = fastest->round_trip_ns();
  if (lo > hi) {  // the intervals disagree: the clocks moved against each other between pings
    lo = fastest->peer_ns - fastest->received_ns;
    hi = fastest->peer_ns - fastest->sent_ns;
  }
  o.offset_ns = lo + (hi - lo) / 2;
  o.uncertainty_ns = (hi - lo + 1) / 2;
  o.at_ns = fastest->sent_ns + fastest->round_trip_ns() / 2;
  return o;
}

int64_t ClockModel::to_reference(int64_t peer_ns) const {
  // peer = ref + offset + drift (ref - at)  =>  ref = (peer - offset + drift at) / (1 + drift)
  if (drift == 0) return peer_ns - offset_ns;
  const double ref = (static_cast<double>(peer_ns - offset_ns - at_ns)) / (1.0 + drift);
  return at_ns + static_cast<int64_t>(std::llround(ref));
}

ClockModel clock_model(const ClockOffset& start, const std::optional<ClockOffset>& end) {
  ClockModel m;
  m.offset_ns = start.offset_ns;
  m.at_ns = start.at_ns;
  m.uncertainty_ns = start.uncertainty_ns;
  if (end && end->at_ns > start.at_ns) {
    m.drift = static_cast<double>(end->offset_ns - start.offset_ns) / static_cast<double>(end->at_ns - start.at_ns);
    // Between the two measurements the line's error is within the larger of theirs.
    m.uncertainty_ns = std::max(start.uncertainty_ns, end->uncertainty_ns);
  }
  return m;
}

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
    if (const auto o = estimate_offset(samples)) offsets[static_cast<size_t>(peer)] = *o;
  }
  return offsets;
}

}  // namespace ts::distributed
