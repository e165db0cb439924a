#pragma once
// What a rank other than 0 sends to rank 0, which writes every rank's records into the one
// run (docs/design.md, "Distribution"): its streamed rows as it goes, and at its end the rest with
// its summaries. Carried as CBOR (nlohmann::json's binary form): compact, and a message that
// does not parse is an error, never rows silently lost.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "profiler/event.h"
#include "profiler/gpu_tracer.h"
#include "store/records.h"
#include "store/writer.h"
#include "vocabulary/clock_alignment.h"
#include "workloads/training_loop.h"

namespace ts::distributed {
class DataParallel;
namespace ps {
class PsJob;
}
}  // namespace ts::distributed

namespace ts::session {

struct RankPayload {
  int64_t rank = 0;
  bool final = false;     // the rank's last message
  store::RunFlush flush;  // streamed rows (the rank field is stamped by rank 0)
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
  // GPU runs traced: this rank's GPU time per device and timed iteration. Rank 0 alone stores
  // its GPU activities; the others send this, a few rows an iteration, and keep the volume.
  std::vector<store::GpuBreakdownRow> gpu_breakdown;
  std::string error;  // the rank's failure, if it failed
};

std::vector<uint8_t> to_bytes(const RankPayload& p);
// Throws std::runtime_error naming what is wrong with a malformed message.
RankPayload from_bytes(const std::vector<uint8_t>& bytes);

// Every row of `p` marked as rank p.rank's (rank 0 does this on receipt, once, for all tables),
// except the parameter-server rows: their rank is not the sender's but data (which worker a
// histogram counts, which rank hosts a shard; a server may report for every worker), set by the
// producer and carried as it is.
void stamp_rank(RankPayload& p);

// The gathering of a distributed run's records on rank 0 (docs/design.md, "How a run flows", 7).
class DbSink;
class RankChannel;

// What a rank adds about itself beyond its streamed rows: its communication breakdown per timed
// iteration, its collectives summarised, and the counts a reader checks the rows against.
struct RankSummary {
  std::vector<store::RankClockRow> clocks;  // rank 0: every other rank's clock against its own
  std::vector<store::RankBreakdownRow> breakdown;
  std::vector<store::CommOpRow> comm_ops;
  std::vector<store::MetricRow> metrics;
  std::vector<store::PsStalenessRow> ps_staleness;  // what this rank's server applied
  std::vector<store::PsServerRow> ps_servers;
};

// From every event and collective call the rank's stream saw (`dp`: its all-reduce, if any).
RankSummary summarise_rank(const std::vector<profiler::Event>& events,
                           const std::vector<distributed::CollectiveRecord>& calls,
                           const distributed::Communicator& comm, const distributed::DataParallel* dp, int64_t warmup);
// A parameter server's figures on this rank: its worker's pushes, its server's work and the
// staleness of what that server applied (per worker and iteration), the layout's balance.
void summarise_ps(const distributed::ps::PsJob& job, int rank, RankSummary& s);

// Rank 0's measurements of the other ranks' clocks (distributed/clock_sync.h: index = rank) as
// stored rows, the start's and, when measured, the end's; rank 0 itself and ranks whose pings
// gave nothing are left out.
std::vector<store::RankClockRow> clock_rows(const std::vector<vocabulary::ClockOffset>& start,
                                            const std::vector<vocabulary::ClockOffset>& end);

// A rank other than 0, at its end: its last rows (`unwritten`), its summaries, its memory peak
// and change log (the ledger's), its GPU breakdown over the loop's counted iterations (from
// `gpu`, its GPU trace, where it traced one), and its failure, for rank 0 to write into the run.
RankPayload final_payload(int rank, RankSummary mine, store::RunFlush unwritten, const workloads::LoopResult& loop,
                          const std::string& error, const std::optional<profiler::GpuTrace>& gpu = std::nullopt);

// Rank 0: the other ranks' records its stream's sink has not written, then their final messages,
// waiting up to `wait` for them; the run fails, with the reason added to `error`, for each rank
// that sent none or that failed.
std::vector<RankPayload> gather_finals(DbSink& sink, RankChannel& channel, std::chrono::seconds wait,
                                       store::RunStatus& status, std::string& error);
// The verdict part of gather_finals: ranks whose final message did not come, ranks that failed.
void add_rank_verdicts(const std::vector<RankPayload>& remote, const std::vector<int>& missing,
                       std::chrono::seconds wait, store::RunStatus& status, std::string& error);

// Rank 0's summaries and the other ranks' records into run `run_id` (the final write or a spill).
void write_ranks(store::Writer& w, int64_t run_id, const RankSummary& mine, const std::vector<RankPayload>& remote);

}  // namespace ts::session
