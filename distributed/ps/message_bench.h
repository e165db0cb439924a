#pragma once
// A parameter server's messages across a link, measured as its workers send them: rank `worker`
// sends blocking messages of a key's size (wire.h) to rank `server`, whose receiving thread takes
// them as a server's does (polls, a matched probe, the whole message); each message's time as its
// sender sees it, from the send until MPI_Send returns (for a large message: once the receiver has
// it). Then as many again with a busy thread beside them on both ranks (a rank's compute), and the
// rate that thread kept: what a message costs on the link, at best and with every rank's compute
// busy beside it (on the 2-vCPU machine's namespace hosts the second is mostly the scheduler's:
// ~7 ms from 64 KiB to 1 MiB, docs/distributed.md).
#include <mpi.h>

#include <cstdint>
#include <vector>

namespace ts::distributed::ps {

struct PsMessageRate {
  int64_t bytes = 0;       // the key's floats (the header besides)
  double ns = 0;           // mean per message, alone
  double beside_ns = 0;    // mean per message with a busy thread on both ranks
  double beside_rate = 0;  // the rate those threads kept, as a share of theirs alone (both ranks' mean)
};

// The sizes a sweep measures: from a bias's to four chunks of the default 1 MiB.
std::vector<int64_t> ps_message_sizes();

// Collective over `comm` (every rank calls it with the same arguments and gets the same result):
// `worker` sends, `server` receives, the others wait. `server` != `worker`; per size and mode two
// untimed messages, then `messages` >= 1 timed ones and more up to 50 ms. Throws DistError (the other ranks are then
// the stall watch's: the benchmark's job ends).
std::vector<PsMessageRate> measure_ps_messages(MPI_Comm comm, int server, int worker, const std::vector<int64_t>& sizes,
                                               int messages);

}  // namespace ts::distributed::ps
