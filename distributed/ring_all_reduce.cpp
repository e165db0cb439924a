#include "distributed/ring_all_reduce.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "distributed/error.h"
#include "distributed/mpi_check.h"
#include "distributed/ring_schedule.h"

namespace ts::distributed {

AllReduceAlgorithm all_reduce_algorithm() {
  const char* v = std::getenv("TS_ALLREDUCE");
  if (v == nullptr || *v == 0 || std::string_view(v) == "mpi") return AllReduceAlgorithm::mpi;
  if (std::string_view(v) == "ring") return AllReduceAlgorithm::ring;
  if (std::string_view(v) == "tcp") return AllReduceAlgorithm::tcp;
  throw std::invalid_argument("TS_ALLREDUCE='" + std::string(v) + "': 'mpi' (the default), 'ring' or 'tcp'");
}

std::string_view to_string(AllReduceAlgorithm a) {
  switch (a) {
    case AllReduceAlgorithm::ring: return "ring";
    case AllReduceAlgorithm::tcp: return "tcp";
    case AllReduceAlgorithm::mpi: return "mpi";
  }
  return "mpi";
}

std::span<const int> PollingWait::some(std::span<MPI_Request> requests) {
  done_.resize(requests.size());
  const auto start = std::chrono::steady_clock::now();
  int64_t sleep_us = 1;
  for (;;) {
    int completed = 0;
    TS_MPI_CHECK(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed, done_.data(),
                              MPI_STATUSES_IGNORE));
    if (completed == MPI_UNDEFINED) return {};  // nothing left to wait for
    if (completed > 0) return {done_.data(), static_cast<size_t>(completed)};
    const int64_t waited_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
    sleep_us = std::min({sleep_us * 2, std::max<int64_t>(1, waited_us / 32), max_sleep_us_});
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }
}

void ring_all_reduce(MPI_Comm comm, void* data, size_t count, DataType type, ReduceOp op, const RingOptions& options) {
  int n = 1, me = 0;
  TS_MPI_CHECK(MPI_Comm_size(comm, &n));
  TS_MPI_CHECK(MPI_Comm_rank(comm, &me));
  if (n == 1 || count == 0) return;
  const size_t elem = size_of(type);
  const size_t chunk = std::max<size_t>(1, std::min(options.chunk_bytes, static_cast<size_t>(INT_MAX)) / elem);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  auto* bytes = static_cast<char*>(data);
  std::vector<char> incoming((count / static_cast<size_t>(n) + 1) * elem);  // one segment, for reducing
  PollingWait wait(options.max_sleep_us);
  std::vector<MPI_Request> requests;
  std::vector<size_t> piece_at;  // element offset, within the received segment, of each receive's piece

  // One step of the ring: segment `send_seg` to the right, segment `recv_seg` from the left,
  // either reduced into ours (reduce-scatter) or copied over it (all-gather).
  auto step = [&](int send_seg, int recv_seg, bool reduce) {
    const size_t s0 = segment_begin(count, n, send_seg), s1 = segment_begin(count, n, send_seg + 1);
    const size_t r0 = segment_begin(count, n, recv_seg), r1 = segment_begin(count, n, recv_seg + 1);
    requests.clear();
    piece_at.clear();
    for (size_t at = 0; r0 + at < r1; at += chunk) {
      const int len = static_cast<int>(std::min(chunk, r1 - r0 - at));
      void* into = reduce ? static_cast<void*>(incoming.data() + at * elem) : bytes + (r0 + at) * elem;
      requests.emplace_back();
      TS_MPI_CHECK(MPI_Irecv(into, len * static_cast<int>(elem), MPI_BYTE, left, options.tag, comm, &requests.back()));
      piece_at.push_back(at);
    }
    const size_t receives = requests.size();
    for (size_t at = 0; s0 + at < s1; at += chunk) {
      const int len = static_cast<int>(std::min(chunk, s1 - s0 - at));
      requests.emplace_back();
      TS_MPI_CHECK(MPI_Isend(bytes + (s0 + at) * elem, len * static_cast<int>(elem), MPI_BYTE, right, options.tag, comm,
                             &requests.back()));
    }
    for (auto done = wait.some(requests); !done.empty(); done = wait.some(requests)) {
      if (!reduce) continue;
      for (int i : done) {
        if (static_cast<size_t>(i) >= receives) continue;  // a send
        const size_t at = piece_at[static_cast<size_t>(i)];
        reduce_into(bytes + (r0 + at) * elem, incoming.data() + at * elem, std::min(chunk, r1 - r0 - at), type, op);
      }
    }
  };
  for (const RingStep& s : ring_steps(n, me)) step(s.send_segment, s.recv_segment, s.reduce);
}

}  // namespace ts::distributed
