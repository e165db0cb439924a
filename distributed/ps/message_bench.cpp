#include "distributed/ps/message_bench.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <thread>

#include "distributed/busy_thread.h"
#include "distributed/error.h"
#include "distributed/mpi_check.h"
#include "distributed/ps/wire.h"

namespace ts::distributed::ps {

namespace {

constexpr int kUntimed = 2;
// The timed messages of a size last at least this long (up to kAtMost of them): a busy thread's
// rate over a few small messages' microseconds is its counter's granularity, not a rate.
constexpr auto kAtLeast = std::chrono::milliseconds(50);
constexpr int kAtMost = 4096;

// The busy thread's rate alone, over a moment with nothing beside it.
double rate_alone(const BusyThread& busy) {
  double s = 0;
  return busy_rate(
      busy, [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }, s);
}

}  // namespace

std::vector<int64_t> ps_message_sizes() { return {4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}; }

std::vector<PsMessageRate> measure_ps_messages(MPI_Comm world, int server, int worker,
                                               const std::vector<int64_t>& sizes, int messages) {
  if (server == worker || messages < 1) throw DistError("ps message benchmark: a sender, a receiver and a message");
  MPI_Comm comm = MPI_COMM_NULL;  // its own: nothing else on the ranks can take these messages
  TS_MPI_CHECK(MPI_Comm_dup(world, &comm));
  int rank = 0;
  TS_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  // Per size: the sender's mean alone and beside, and each rank's kept rate halved (summed below).
  std::vector<double> figures(sizes.size() * 3, 0.0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t count = std::max<int64_t>(1, sizes[i] / static_cast<int64_t>(sizeof(float)));
    const std::vector<float> data(static_cast<size_t>(count), 1.0f);
    for (const bool beside : {false, true}) {
      std::optional<BusyThread> busy;
      double alone = 0;
      if (beside) {
        busy.emplace();
        alone = rate_alone(*busy);
      }
      TS_MPI_CHECK(MPI_Barrier(comm));
      double seconds = 0, kept = 0;
      const auto run = [&] {
        if (rank == server) {
          std::exception_ptr error;
          std::thread receiver([&] {  // as a server's receiving thread, until the sender is done
            try {
              for (;;) {
                int source = 0;
                if (receive_message(comm, source).header.kind == MessageKind::done) break;
              }
            } catch (...) {
              error = std::current_exception();
            }
          });
          receiver.join();
          if (error) std::rethrow_exception(error);
        } else if (rank == worker) {
          const MessageHeader h{MessageKind::push, 0, 0, -1, 1, 0};
          for (int m = 0; m < kUntimed; ++m) send_message(comm, server, h, data.data(), count);
          // At least `messages`, and for long enough that the busy thread's rate means something.
          double ns = 0;
          int sent = 0;
          const auto t0 = std::chrono::steady_clock::now();
          while (sent < messages || (std::chrono::steady_clock::now() - t0 < kAtLeast && sent < kAtMost)) {
            const auto m0 = std::chrono::steady_clock::now();
            send_message(comm, server, h, data.data(), count);
            ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - m0).count();
            ++sent;
          }
          send_message(comm, server, MessageHeader{MessageKind::done, 0, 0, -1, 0, 0}, nullptr, 0);
          figures[i * 3 + (beside ? 1 : 0)] = ns / sent;
        }
      };
      if (busy) {
        kept = busy_rate(*busy, run, seconds);
        if ((rank == server || rank == worker) && alone > 0) figures[i * 3 + 2] = kept / alone / 2;
      } else {
        run();
      }
    }
  }
  TS_MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, figures.data(), static_cast<int>(figures.size()), MPI_DOUBLE, MPI_SUM, comm));
  TS_MPI_CHECK(MPI_Comm_free(&comm));
  std::vector<PsMessageRate> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back({sizes[i], figures[i * 3], figures[i * 3 + 1], figures[i * 3 + 2]});
  }
  return out;
}

}  // namespace ts::distributed::ps
