#include "session/rank_channel.h"

#include <climits>
#include <stdexcept>
#include <string>
#include <thread>

#include "distributed/mpi_check.h"
#include "distributed/stall_watch.h"

namespace ts::session {

namespace {
constexpr int kRecordsTag = 7101;
}

RankChannel::RankChannel(MPI_Comm world) {
  TS_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  TS_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  TS_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  TS_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  final_seen_.assign(static_cast<size_t>(size_), false);
  final_seen_[0] = true;
}

RankChannel::~RankChannel() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void RankChannel::send(const RankPayload& payload) {
  const std::vector<uint8_t> bytes = to_bytes(payload);
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    throw std::runtime_error("rank " + std::to_string(rank_) + "'s records for one flush exceed 2 GiB");
  }
  const distributed::StallWatch::Call watched("records", "send", payload.final ? "final records" : "records", 0);
  TS_MPI_CHECK(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, kRecordsTag, comm_));
}

bool RankChannel::receive_one(std::vector<RankPayload>& out) {
  int flag = 0;
  MPI_Status status;
  TS_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kRecordsTag, comm_, &flag, &status));
  if (!flag) return false;
  int count = 0;
  TS_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  TS_MPI_CHECK(MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, kRecordsTag, comm_, MPI_STATUS_IGNORE));
  RankPayload p = from_bytes(bytes);
  if (p.rank != status.MPI_SOURCE) {
    throw std::runtime_error("records from rank " + std::to_string(status.MPI_SOURCE) + " claim to be rank " +
                             std::to_string(p.rank) + "'s");
  }
  stamp_rank(p);
  if (p.final) final_seen_[static_cast<size_t>(p.rank)] = true;
  out.push_back(std::move(p));
  return true;
}

std::vector<RankPayload> RankChannel::poll() {
  std::vector<RankPayload> out;
  while (receive_one(out)) {
  }
  return out;
}

std::vector<RankPayload> RankChannel::wait_finals(std::chrono::milliseconds timeout, std::vector<int>& missing) {
  std::vector<RankPayload> out;
  const distributed::StallWatch::Call watched("records", "wait", "every rank's final records", distributed::kSomeRank);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    while (receive_one(out)) {
    }
    bool all = true;
    for (bool seen : final_seen_) all = all && seen;
    if (all || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  missing.clear();
  for (int r = 0; r < size_; ++r) {
    if (!final_seen_[static_cast<size_t>(r)]) missing.push_back(r);
  }
  return out;
}

}  // namespace ts::session
