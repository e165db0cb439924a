#include "store/import.h"

#include <fmt/format.h>

#include <compare>
#include <limits>

namespace ts::store {

int64_t copy_run(Reader& from, int64_t id, Writer& to, int64_t replace) {
  const auto run = from.run(id);
  if (!run) throw StoreError(StoreError::Kind::not_found, "no run with id " + std::to_string(id) + " to copy");
  Writer::Transaction tx(to);
  if (replace > 0) to.delete_run(replace);
  const int64_t copy = to.begin_run(*run, replace);
  to.add_environment(copy, from.environment(id));
  constexpr std::optional<int64_t> all_ranks = std::nullopt;
  to.add_iterations(copy, from.iterations(id, all_ranks));
  to.add_phases(copy, from.phases(id, all_ranks));
  to.add_events(
      copy, from.events(id, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1, all_ranks));
  to.add_layers(copy, from.layers(id));
  to.add_op_summary(copy, from.op_summary(id));
  to.add_memory_timeline(copy, from.memory_timeline(id, all_ranks));
  to.add_memory_peak(copy, from.memory_peak(id, all_ranks));
  to.add_memory_changes(copy, from.memory_changes(id, all_ranks));
  to.add_metrics(copy, from.metrics(id, all_ranks));
  to.add_samples(copy, from.samples(id, all_ranks));
  to.add_gpu_activities(copy, from.gpu_activities(id));
  to.add_gpu_breakdown(copy, from.gpu_breakdown(id, all_ranks));
  to.add_copy_summary(copy, from.copy_summary(id));
  to.add_collectives(copy, from.collectives(id, all_ranks));
  to.add_comm_ops(copy, from.comm_ops(id));
  to.add_rank_clocks(copy, from.rank_clocks(id));
  to.add_collective_waits(copy, from.collective_waits(id));
  to.add_rank_breakdown(copy, from.rank_breakdown(id));
  to.add_collective_bench(copy, from.collective_bench(id));
  to.add_collective_bench_samples(copy, from.collective_bench_samples(id));
  to.add_ps_staleness(copy, from.ps_staleness(id));
  to.add_ps_servers(copy, from.ps_servers(id));
  to.add_gradients(copy, from.gradients(id, all_ranks));
  if (auto projection = from.projection_of(id)) {
    // A projection's inputs are runs of `from`: runs are copied one at a time, with no map from
    // their ids there to their copies' here, so the copy keeps none of them (0: none) rather than
    // ids that name other runs, or none, in `to`.
    projection->run_id = copy;
    projection->source_run_id = projection->sweep_run_id = projection->measured_run_id = 0;
    to.add_projection(*projection);
  }
  RunFlush heartbeat;  // the original's, not the copy's time: a lost run stays lost
  heartbeat.heartbeat_ms = run->heartbeat_ms;
  heartbeat.progress_ms = run->progress_ms;
  heartbeat.stall_after_ms = run->stall_after_ms;
  to.flush(copy, heartbeat);
  if (run->status != RunStatus::running) to.finish_run(copy, run->status, run->ended_at, run->error);
  tx.commit();
  return copy;
}

std::optional<int64_t> find_same_run(Reader& in, const RunRow& run) {
  for (const RunRow& r : in.runs()) {
    if (!run.uuid.empty() && !r.uuid.empty()) {
      if (r.uuid == run.uuid) return r.id;
      continue;
    }
    // Before v9: one process, one start time (a suite's runs that start in the same second are
    // told apart only by their uuid).
    if (run.pid != 0 && r.host == run.host && r.boot_id == run.boot_id && r.pid == run.pid &&
        r.pid_start == run.pid_start && r.started_at == run.started_at)
      return r.id;
  }
  return std::nullopt;
}

namespace {

struct Completeness {
  bool finished = false;
  int64_t iterations = 0, metrics = 0, heartbeat_ms = 0;
  auto operator<=>(const Completeness&) const = default;
};

Completeness completeness(Reader& db, const RunRow& run) {
  return {run.status != RunStatus::running, db.iteration_count(run.id, std::nullopt),
          static_cast<int64_t>(db.metrics(run.id, std::nullopt).size()), run.heartbeat_ms};
}

}  // namespace

CopyChoice choose_copy(Reader& existing_db, const RunRow& existing, Reader& incoming_db, const RunRow& incoming) {
  const Completeness have = completeness(existing_db, existing), come = completeness(incoming_db, incoming);
  const auto say = [](const RunRow& r, const Completeness& c) {
    return fmt::format("{}, {} iterations, {} metrics", to_string(r.status), c.iterations, c.metrics);
  };
  if (come > have) {
    const char* what = existing.status == RunStatus::running ? "streamed part" : "less complete copy";
    return {true, fmt::format("replacing its {} ({})", what, say(existing, have))};
  }
  if (come == have) return {false, "already there"};
  return {false,
          fmt::format("kept the db's more complete copy ({}; this one: {})", say(existing, have), say(incoming, come))};
}

}  // namespace ts::store
