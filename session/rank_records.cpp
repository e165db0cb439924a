#include "session/rank_records.h"

#include <stdexcept>

#include "distributed/data_parallel.h"
#include "distributed/ps/ps_job.h"
#include "fmt/format.h"
#include "memprof/ledger.h"
#include "nlohmann/json.hpp"
#include "session/rank_channel.h"
#include "session/record.h"
#include "session/run_stream.h"

namespace ts::session {

namespace {

using nlohmann::json;

// Each row as an array in a fixed field order: smaller than objects, and the order is the format.
json flush_json(const store::RunFlush& f) {
  json j = json::object();
  json a = json::array();
  for (const auto& r : f.iterations) a.push_back({r.index, r.warmup, r.start_ns, r.end_ns, r.samples, r.loss});
  j["it"] = std::move(a);
  a = json::array();
  for (const auto& r : f.phases) a.push_back({r.iteration, r.phase, r.start_ns, r.end_ns});
  j["ph"] = std::move(a);
  a = json::array();
  for (const auto& r : f.events)
    a.push_back({r.start_ns, r.end_ns, r.name, r.layer, r.kind, r.pass, r.iteration, r.thread});
  j["ev"] = std::move(a);
  a = json::array();
  for (const auto& r : f.memory) a.push_back({r.t_ns, r.category, r.live_bytes});
  j["mem"] = std::move(a);
  a = json::array();
  for (const auto& r : f.samples) a.push_back({r.t_ns, r.name, r.value});
  j["sa"] = std::move(a);
  a = json::array();
  for (const auto& r : f.collectives)
    a.push_back({r.iteration, r.thread, r.collective, r.label, r.bytes, r.start_ns, r.end_ns});
  j["co"] = std::move(a);
  return j;
}

store::RunFlush flush_from(const json& j) {
  store::RunFlush f;
  for (const auto& r : j.at("it")) f.iterations.push_back({r.at(0), r.at(1), r.at(2), r.at(3), r.at(4), r.at(5)});
  for (const auto& r : j.at("ph")) f.phases.push_back({r.at(0), r.at(1), r.at(2), r.at(3)});
  for (const auto& r : j.at("ev")) {
    f.events.push_back({r.at(0), r.at(1), r.at(2), r.at(3), r.at(4), r.at(5), r.at(6), r.at(7)});
  }
  for (const auto& r : j.at("mem")) f.memory.push_back({r.at(0), r.at(1), r.at(2)});
  for (const auto& r : j.at("sa")) f.samples.push_back({r.at(0), r.at(1), r.at(2)});
  for (const auto& r : j.at("co")) {
    store::CollectiveRow c;
    c.iteration = r.at(0);
    c.thread = r.at(1);
    c.collective = r.at(2);
    c.label = r.at(3);
    c.bytes = r.at(4);
    c.start_ns = r.at(5);
    c.end_ns = r.at(6);
    f.collectives.push_back(std::move(c));
  }
  return f;
}

}  // namespace

std::vector<uint8_t> to_bytes(const RankPayload& p) {
  json j = {{"rank", p.rank}, {"final", p.final}, {"flush", flush_json(p.flush)}, {"error", p.error}};
  json a = json::array();
  for (const auto& r : p.breakdown) {
    a.push_back({r.iteration, r.start_ns, r.end_ns, r.compute_ns, r.comm_ns, r.overlap_ns, r.exposed_comm_ns, r.idle_ns,
                 r.backward_wait_ns, r.pull_wait_ns, r.push_wait_ns});
  }
  j["bd"] = std::move(a);
  a = json::array();
  for (const auto& r : p.comm_ops) {
    a.push_back({r.backend, r.collective, r.bytes, r.ranks, r.count, r.total_ns, r.mean_ns, r.min_ns, r.max_ns,
                 r.algbw_gbps, r.busbw_gbps});
  }
  j["ops"] = std::move(a);
  a = json::array();
  for (const auto& r : p.metrics) a.push_back({r.name, r.value, r.unit, r.iteration});
  j["me"] = std::move(a);
  a = json::array();
  for (const auto& r : p.memory_peak) a.push_back({r.category, r.bytes, r.t_ns});
  j["pk"] = std::move(a);
  a = json::array();
  for (const auto& r : p.memory_changes) a.push_back({r.t_ns, r.category, r.owner, r.delta});
  j["mc"] = std::move(a);
  a = json::array();
  for (const auto& r : p.ps_staleness) a.push_back({r.rank, r.iteration, r.kind, r.staleness, r.count});
  j["pst"] = std::move(a);
  a = json::array();
  for (const auto& r : p.ps_servers) {
    a.push_back({r.server, r.rank, r.keys, r.bytes_held, r.bytes_in, r.bytes_out, r.pushes, r.pulls, r.updates,
                 r.busy_ns, r.queue_max, r.queue_mean});
  }
  j["pss"] = std::move(a);
  a = json::array();
  for (const auto& r : p.gpu_breakdown) {
    a.push_back({r.device, r.iteration, r.start_ns, r.end_ns, r.compute_ns, r.comm_ns, r.memcpy_ns, r.memset_ns,
                 r.overlap_ns, r.exposed_comm_ns, r.busy_ns, r.idle_ns});
  }
  j["gb"] = std::move(a);
  return json::to_cbor(j);
}

RankPayload from_bytes(const std::vector<uint8_t>& bytes) {
  try {
    const json j = json::from_cbor(bytes);
    RankPayload p;
    p.rank = j.at("rank");
    p.final = j.at("final");
    p.error = j.at("error");
    p.flush = flush_from(j.at("flush"));
    for (const auto& r : j.at("bd")) {
      store::RankBreakdownRow b;
      b.iteration = r.at(0);
      b.start_ns = r.at(1);
      b.end_ns = r.at(2);
      b.compute_ns = r.at(3);
      b.comm_ns = r.at(4);
      b.overlap_ns = r.at(5);
      b.exposed_comm_ns = r.at(6);
      b.idle_ns = r.at(7);
      b.backward_wait_ns = r.at(8);
      b.pull_wait_ns = r.at(9);
      b.push_wait_ns = r.at(10);
      p.breakdown.push_back(b);
    }
    for (const auto& r : j.at("ops")) {
      store::CommOpRow o;
      o.backend = r.at(0);
      o.collective = r.at(1);
      o.bytes = r.at(2);
      o.ranks = r.at(3);
      o.count = r.at(4);
      o.total_ns = r.at(5);
      o.mean_ns = r.at(6);
      o.min_ns = r.at(7);
      o.max_ns = r.at(8);
      o.algbw_gbps = r.at(9);
      o.busbw_gbps = r.at(10);
      p.comm_ops.push_back(std::move(o));
    }
    for (const auto& r : j.at("me")) p.metrics.push_back({r.at(0), r.at(1), r.at(2), r.at(3)});
    for (const auto& r : j.at("pk")) p.memory_peak.push_back({r.at(0), r.at(1), r.at(2)});
    for (const auto& r : j.at("mc")) p.memory_changes.push_back({r.at(0), r.at(1), r.at(2), r.at(3)});
    for (const auto& r : j.at("pst")) {
      store::PsStalenessRow s;
      s.rank = r.at(0);
      s.iteration = r.at(1);
      s.kind = r.at(2);
      s.staleness = r.at(3);
      s.count = r.at(4);
      p.ps_staleness.push_back(std::move(s));
    }
    for (const auto& r : j.at("pss")) {
      store::PsServerRow s;
      s.server = r.at(0);
      s.rank = r.at(1);
      s.keys = r.at(2);
      s.bytes_held = r.at(3);
      s.bytes_in = r.at(4);
      s.bytes_out = r.at(5);
      s.pushes = r.at(6);
      s.pulls = r.at(7);
      s.updates = r.at(8);
      s.busy_ns = r.at(9);
      s.queue_max = r.at(10);
      s.queue_mean = r.at(11);
      p.ps_servers.push_back(s);
    }
    for (const auto& r : j.at("gb")) {
      store::GpuBreakdownRow g;
      g.device = r.at(0);
      g.iteration = r.at(1);
      g.start_ns = r.at(2);
      g.end_ns = r.at(3);
      g.compute_ns = r.at(4);
      g.comm_ns = r.at(5);
      g.memcpy_ns = r.at(6);
      g.memset_ns = r.at(7);
      g.overlap_ns = r.at(8);
      g.exposed_comm_ns = r.at(9);
      g.busy_ns = r.at(10);
      g.idle_ns = r.at(11);
      p.gpu_breakdown.push_back(g);
    }
    return p;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("a rank's records did not parse: ") + e.what());
  }
}

void stamp_rank(RankPayload& p) {
  const int64_t r = p.rank;
  for (auto& x : p.flush.iterations) x.rank = r;
  for (auto& x : p.flush.phases) x.rank = r;
  for (auto& x : p.flush.events) x.rank = r;
  for (auto& x : p.flush.memory) x.rank = r;
  for (auto& x : p.flush.samples) x.rank = r;
  for (auto& x : p.flush.collectives) x.rank = r;
  for (auto& x : p.breakdown) x.rank = r;
  for (auto& x : p.comm_ops) x.rank = r;
  for (auto& x : p.metrics) x.rank = r;
  for (auto& x : p.memory_peak) x.rank = r;
  for (auto& x : p.memory_changes) x.rank = r;
  for (auto& x : p.gpu_breakdown) x.rank = r;
  // p.ps_staleness and p.ps_servers keep their producer's rank (rank_records.h).
}

void summarise_ps(const distributed::ps::PsJob& job, int rank, RankSummary& s) {
  if (rank == 0) {
    s.metrics.push_back({"ps_keys", static_cast<double>(job.layout().keys.size()), "keys", -1});
    s.metrics.push_back({"ps_server_imbalance", job.layout().imbalance(), "max/mean bytes", -1});
  }
  if (const distributed::ps::PsWorker* w = job.worker()) {
    s.metrics.push_back({"ps_pushes", static_cast<double>(w->pushes()), "messages", -1});
    s.metrics.push_back({"ps_bytes_pushed", static_cast<double>(w->bytes_pushed()), "bytes", -1});
  }
  for (const auto& st : job.server_stats()) {
    s.ps_servers.push_back({st.server, st.rank, st.keys, st.bytes_held, st.bytes_in, st.bytes_out, st.pushes, st.pulls,
                            st.updates, st.busy_ns, st.queue_max, st.queue_mean});
  }
  for (const auto& [what, count] : job.staleness()) {
    const auto& [worker, iteration, clock_gap, staleness] = what;
    s.ps_staleness.push_back({worker, iteration, clock_gap ? "clock_gap" : "updates", staleness, count});
  }
}

RankSummary summarise_rank(const std::vector<profiler::Event>& events,
                           const std::vector<distributed::CollectiveRecord>& calls,
                           const distributed::Communicator& comm, const distributed::DataParallel* dp, int64_t warmup) {
  RankSummary s;
  s.breakdown = rank_breakdown_rows(events, [warmup](int32_t i) { return i >= warmup; });
  s.comm_ops = comm_op_rows(calls, comm.backend(), comm.size());
  // Each rank's events are counted where they are made: a reader compares this with the rows.
  s.metrics.push_back({"events_recorded", static_cast<double>(events.size()), "events", -1});
  // Over the timed iterations (docs/formulas.md): how much of the time communication kept the
  // rank from computing, and how much of the communication backward hid.
  double span = 0, comm_ns = 0, overlap = 0, exposed = 0;
  for (const auto& b : s.breakdown) {
    span += static_cast<double>(b.end_ns - b.start_ns);
    comm_ns += static_cast<double>(b.comm_ns);
    overlap += static_cast<double>(b.overlap_ns);
    exposed += static_cast<double>(b.exposed_comm_ns);
  }
  if (span > 0) s.metrics.push_back({"exposed_comm_fraction", exposed / span, "fraction", -1});
  if (comm_ns > 0) s.metrics.push_back({"comm_hidden_fraction", overlap / comm_ns, "fraction", -1});
  if (dp) {
    s.metrics.push_back({"dp_buckets", static_cast<double>(dp->buckets().size()), "buckets", -1});
    s.metrics.push_back({"dp_cross_barrier", dp->cross_barrier() ? 1.0 : 0.0, "flag", -1});
    s.metrics.push_back(
        {"dp_parameters_without_gradient", static_cast<double>(dp->parameters_without_gradient()), "parameters", -1});
  }
  return s;
}

RankPayload final_payload(int rank, RankSummary mine, store::RunFlush unwritten, const workloads::LoopResult& loop,
                          const std::string& error, const std::optional<profiler::GpuTrace>& gpu) {
  const auto& ledger = memprof::Ledger::global();
  RankPayload last;
  last.rank = rank;
  last.final = true;
  last.flush = std::move(unwritten);
  last.breakdown = std::move(mine.breakdown);
  last.comm_ops = std::move(mine.comm_ops);
  last.metrics = std::move(mine.metrics);
  last.ps_staleness = std::move(mine.ps_staleness);
  last.ps_servers = std::move(mine.ps_servers);
  last.memory_peak = memory_peak_rows(loop.memory_peak.t_ns > 0 ? loop.memory_peak : ledger.peak());
  // The ledger's change log with owners (the first kMaxStoredMemoryChanges), stored as this rank's.
  const size_t logged = ledger.change_count();
  memprof::Ledger::ChangeCursor from_start;
  last.memory_changes = memory_change_rows(ledger, from_start, kMaxStoredMemoryChanges);
  for (auto& m : memory_change_counts(logged, last.memory_changes.size())) last.metrics.push_back(std::move(m));
  // The same iterations as rank 0's breakdown counts (record.cpp), so the ranks' rows line up.
  if (gpu) last.gpu_breakdown = gpu_breakdown_rows(*gpu, counted_iterations(loop));
  last.error = error;
  return last;
}

void add_rank_verdicts(const std::vector<RankPayload>& remote, const std::vector<int>& missing,
                       std::chrono::seconds wait, store::RunStatus& status, std::string& error) {
  if (!missing.empty()) {
    std::string list;
    for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
    error +=
        (error.empty() ? "" : "; ") + fmt::format("rank(s) {} sent no final records within {} s", list, wait.count());
    status = store::RunStatus::failed;
  }
  for (const auto& p : remote) {
    if (p.final && !p.error.empty()) {
      error += (error.empty() ? "" : "; ") + fmt::format("rank {}: {}", p.rank, p.error);
      status = store::RunStatus::failed;
    }
  }
}

std::vector<RankPayload> gather_finals(DbSink& sink, RankChannel& channel, std::chrono::seconds wait,
                                       store::RunStatus& status, std::string& error) {
  std::vector<RankPayload> remote = sink.take_remote();
  std::vector<int> missing;
  for (auto& p : channel.wait_finals(wait, missing)) remote.push_back(std::move(p));
  add_rank_verdicts(remote, missing, wait, status, error);
  return remote;
}

std::vector<store::RankClockRow> clock_rows(const std::vector<vocabulary::ClockOffset>& start,
                                            const std::vector<vocabulary::ClockOffset>& end) {
  std::vector<store::RankClockRow> rows;
  const auto add = [&rows](const std::vector<vocabulary::ClockOffset>& offsets, const char* phase) {
    for (size_t r = 1; r < offsets.size(); ++r) {
      const auto& o = offsets[r];
      if (o.pings == 0) continue;  // no usable ping: nothing measured
      rows.push_back(
          {static_cast<int64_t>(r), phase, o.offset_ns, o.uncertainty_ns, o.at_ns, o.min_round_trip_ns, o.pings});
    }
  };
  add(start, "start");
  add(end, "end");
  return rows;
}

void write_ranks(store::Writer& w, int64_t run_id, const RankSummary& mine, const std::vector<RankPayload>& remote) {
  w.add_rank_clocks(run_id, mine.clocks);
  w.add_rank_breakdown(run_id, mine.breakdown);
  w.add_comm_ops(run_id, mine.comm_ops);
  w.add_metrics(run_id, mine.metrics);
  w.add_ps_staleness(run_id, mine.ps_staleness);
  w.add_ps_servers(run_id, mine.ps_servers);
  for (const auto& p : remote) {
    w.flush(run_id, p.flush);
    w.add_rank_breakdown(run_id, p.breakdown);
    w.add_comm_ops(run_id, p.comm_ops);
    w.add_metrics(run_id, p.metrics);
    w.add_memory_peak(run_id, p.memory_peak);
    w.add_memory_changes(run_id, p.memory_changes);
    w.add_ps_staleness(run_id, p.ps_staleness);
    w.add_ps_servers(run_id, p.ps_servers);
    w.add_gpu_breakdown(run_id, p.gpu_breakdown);
  }
}

}  // namespace ts::session
