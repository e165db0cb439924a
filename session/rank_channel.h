#pragma once
// The path of the ranks' records to rank 0: point-to-point MPI messages on a communicator of
// its own (so they never match the gradients' collectives), one message per flush.
#include <mpi.h>

#include <chrono>
#include <vector>

#include "session/rank_records.h"

namespace ts::session {

class RankChannel {
 public:
  explicit RankChannel(MPI_Comm world);
  ~RankChannel();
  RankChannel(const RankChannel&) = delete;
  RankChannel& operator=(const RankChannel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Ranks other than 0: to rank 0 (blocks until MPI has the message).
  void send(const RankPayload& payload);
  // Rank 0: the messages that have arrived, in arrival order, each stamped with its rank.
  std::vector<RankPayload> poll();
  // Rank 0: receives until every other rank's final message has come or `timeout` has passed.
  // Returns what came; `missing` gets the ranks whose final message did not.
  std::vector<RankPayload> wait_finals(std::chrono::milliseconds timeout, std::vector<int>& missing);

 private:
  bool receive_one(std::vector<RankPayload>& out);
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<bool> final_seen_;
};

}  // namespace ts::session
