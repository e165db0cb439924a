#pragma once
// Each rank's clock against rank 0's, measured (issue 41): rank 0 pings every rank in turn over
// MPI; the arithmetic, the bound and the drift line are vocabulary/clock_alignment.h's.
#include <mpi.h>

#include <vector>

#include "vocabulary/clock_alignment.h"

namespace ts::distributed {

using vocabulary::ClockOffset;
using vocabulary::ClockPing;

// Collective over `comm` (on a duplicate of it): rank 0 pings each other rank `pings` times. On rank 0, every rank's
// offset (rank 0's own: 0, exact); elsewhere empty. Every wait is known to the stall watch.
std::vector<ClockOffset> measure_clock_offsets(MPI_Comm comm, int pings);

}  // namespace ts::distributed
