#pragma once
// What every stored distributed run must satisfy, for the end-to-end tests of `run --nproc`.
#include <gtest/gtest.h>

#include <cstdint>

#include "store/reader.h"

namespace ts::testing {

// compute + exposed comm + idle = span and overlap <= comm, on every stored iteration of every rank.
inline void expect_breakdown_identities(store::Reader& r, int64_t run) {
  const auto rows = r.rank_breakdown(run);
  ASSERT_FALSE(rows.empty());
  for (const auto& b : rows) {
    const int64_t span = b.end_ns - b.start_ns;
    EXPECT_EQ(b.compute_ns + b.exposed_comm_ns + b.idle_ns, span) << "rank " << b.rank << " iteration " << b.iteration;
    EXPECT_LE(b.overlap_ns, b.comm_ns);
    EXPECT_EQ(b.exposed_comm_ns, b.comm_ns - b.overlap_ns);
    EXPECT_GE(b.idle_ns, 0);
    EXPECT_GT(b.comm_ns, 0) << "every timed iteration all-reduces the gradients";
  }
}

// Nothing lost on the way to rank 0: every rank's stored events are what it recorded, and each
// has its iterations and (all-reduce data parallelism: `collectives`) its collectives.
inline void expect_every_ranks_records(store::Reader& r, int64_t run, int ranks, size_t iterations,
                                       bool collectives = true) {
  const auto counts = r.event_counts_by_rank(run);
  ASSERT_EQ(counts.size(), static_cast<size_t>(ranks));
  for (const auto& [rank, n] : counts) {
    double recorded = -1;
    for (const auto& m : r.metrics(run, rank)) {
      if (m.name == "events_recorded") recorded = m.value;
    }
    EXPECT_EQ(static_cast<double>(n), recorded) << "rank " << rank;
    EXPECT_EQ(r.iterations(run, rank).size(), iterations) << "rank " << rank;
    if (collectives) {
      EXPECT_FALSE(r.collectives(run, rank).empty()) << "rank " << rank;
    }
  }
}

}  // namespace ts::testing
