#pragma once
// What a rank other than 0 sends to rank 0, which writes every rank's records into the one
// run (DESIGN.md, "Distribution"): its streamed rows as it goes, and at its end the rest with
// its summaries. Carried as CBOR (nlohmann::json's binary form): compact, and a message that
// does not parse is an error, never rows silently lost.
#include <cstdint>
#include <string>
#include <vector>

#include "store/records.h"

namespace ts::session {

struct RankPayload {
  int64_t rank = 0;
  bool final = false;            // the rank's last message
  store::RunFlush flush;         // streamed rows (the rank field is stamped by rank 0)
  // Final message only:
  std::vector<store::RankBreakdownRow> breakdown;
  std::vector<store::CommOpRow> comm_ops;
  std::vector<store::MetricRow> metrics;
  std::vector<store::MemoryPeakRow> memory_peak;
  std::vector<store::MemoryChangeRow> memory_changes;  // the ledger's change log (record.h's limit)
  // Parameter-server runs: the staleness histograms and server shards this rank measured. Their
  // `rank` is the producer's and travels with them (a worker's rank; the rank hosting a shard).
  std::vector<store::PsStalenessRow> ps_staleness;
  std::vector<store::PsServerRow> ps_servers;
  std::string error;             // the rank's failure, if it failed
};

std::vector<uint8_t> to_bytes(const RankPayload& p);
// Throws std::runtime_error naming what is wrong with a malformed message.
RankPayload from_bytes(const std::vector<uint8_t>& bytes);

// Every row of `p` marked as rank p.rank's (rank 0 does this on receipt, once, for all tables),
// except the parameter-server rows: their rank is not the sender's but data (which worker a
// histogram counts, which rank hosts a shard; a server may report for every worker), set by the
// producer and carried as it is.
void stamp_rank(RankPayload& p);

}  // namespace ts::session
