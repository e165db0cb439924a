#include "distributed/ps/wire.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "distributed/error.h"
#include "distributed/mpi_check.h"
#include "distributed/stall_watch.h"
#include "vocabulary/ps_polling.h"

namespace ts::distributed::ps {

namespace {
// A message that comes within a few polls is taken at once; then sleeps of 20, 40, ... up to
// 200 microseconds: latency well under a chunk's transfer time even at 10 Gbit (1 MiB: 0.8 ms).
constexpr int kBusyPolls = vocabulary::kPsBusyPolls;
constexpr int64_t kFirstSleepUs = vocabulary::kPsFirstSleepUs, kMaxSleepUs = vocabulary::kPsMaxSleepUs;
}  // namespace

void send_message(MPI_Comm comm, int dest, const MessageHeader& header, const float* data, int64_t count) {
  const size_t bytes = sizeof(MessageHeader) + static_cast<size_t>(count) * sizeof(float);
  if (bytes > static_cast<size_t>(INT32_MAX)) {
    throw DistError("parameter server: a message of " + std::to_string(bytes) +
                    " bytes is over MPI's count limit; use a smaller --chunk-mb");
  }
  std::vector<unsigned char> buffer(bytes);
  std::memcpy(buffer.data(), &header, sizeof(MessageHeader));
  if (count > 0) std::memcpy(buffer.data() + sizeof(MessageHeader), data, static_cast<size_t>(count) * sizeof(float));
  const StallWatch::Call watched("ps", "send", "a message", dest);  // a large one waits for its receiver
  TS_MPI_CHECK(MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_BYTE, dest, kTag, comm));
}

Message receive_message(MPI_Comm comm, int& source) {
  // Matched probe and receive: another thread of this process receiving on the same
  // communicator cannot take the message between the probe and the receive. Polled, backing
  // off to short sleeps: a blocking probe spins a core for as long as it waits (Open MPI's
  // progress loop), and the receiving threads wait most of a run, beside the training's.
  MPI_Message handle;
  MPI_Status status;
  int found = 0;
  for (int polls = 0;; ++polls) {
    TS_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, kTag, comm, &found, &handle, &status));
    if (found != 0) break;
    if (polls < kBusyPolls) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::min(kMaxSleepUs, kFirstSleepUs << std::min(polls - kBusyPolls, 4))));
    }
  }
  int bytes = 0;
  TS_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &bytes));
  std::vector<unsigned char> buffer(static_cast<size_t>(bytes));
  TS_MPI_CHECK(MPI_Mrecv(buffer.data(), bytes, MPI_BYTE, &handle, &status));
  source = status.MPI_SOURCE;
  if (static_cast<size_t>(bytes) < sizeof(MessageHeader) ||
      (static_cast<size_t>(bytes) - sizeof(MessageHeader)) % sizeof(float) != 0) {
    throw DistError("parameter server: a malformed message of " + std::to_string(bytes) + " bytes from rank " +
                    std::to_string(source));
  }
  Message m;
  std::memcpy(&m.header, buffer.data(), sizeof(MessageHeader));
  m.data.resize((static_cast<size_t>(bytes) - sizeof(MessageHeader)) / sizeof(float));
  if (!m.data.empty()) std::memcpy(m.data.data(), buffer.data() + sizeof(MessageHeader), m.data.size() * sizeof(float));
  return m;
}

}  // namespace ts::distributed::ps
