#include "session/run_record.h"

#include <unistd.h>

#include <cstdlib>

#include "collectors/environment.h"
#include "distributed/mpi_runtime.h"
#include "distributed/rank_hosts.h"
#include "distributed/ring_all_reduce.h"
#include "fmt/format.h"
#include "session/record.h"
#include "store/liveness.h"
#include "vocabulary/utc_time.h"

namespace ts::session {

std::filesystem::path spill_path(const std::filesystem::path& db, int64_t run_id) {
  return std::filesystem::path(db.string() + fmt::format(".run{}-{}.spill", run_id, ::getpid()));
}

std::vector<store::EnvEntry> run_environment(const std::vector<std::string>* rank_hosts) {
  auto env = to_env_rows(collectors::snapshot());
  if (rank_hosts) {
    env.push_back({"mpi_library", distributed::MpiRuntime::library_version()});
    env.push_back({"ranks", std::to_string(rank_hosts->size())});
    env.push_back({"rank_hosts", distributed::describe_placement(*rank_hosts)});
    const auto algorithm = distributed::all_reduce_algorithm();
    env.push_back(
        {"allreduce", algorithm == distributed::AllReduceAlgorithm::mpi
                          ? std::string("MPI_Allreduce")
                          : fmt::format("{} from {} KiB, MPI_Allreduce below",
                                        algorithm == distributed::AllReduceAlgorithm::tcp ? "TCP ring" : "ring",
                                        distributed::kRingMinBytes >> 10)});
  }
  if (const char* token = std::getenv("TS_LAUNCH_TOKEN"); token && *token) env.push_back({"launch_token", token});
  return env;
}

RunRecord::RunRecord(const std::filesystem::path& db, std::chrono::milliseconds lock_wait, store::RunInfo info)
    : db_(db), writer_(db, lock_wait), info_(std::move(info)) {
  if (info_.started_at.empty()) info_.started_at = vocabulary::utc_now();
  store::set_writer(info_, store::current_process());
  if (info_.uuid.empty()) info_.uuid = store::new_run_uuid();  // the spill file's copy keeps it
  writer_.check_integrity();                                   // a damaged db is refused before anything goes into it
  id_ = writer_.begin_run(info_);
}

void RunRecord::add_environment(std::span<const store::EnvEntry> rows) { writer_.add_environment(id_, rows); }

void RunRecord::heartbeat(store::RunFlush rows) {
  rows.heartbeat_ms = store::unix_time_ms();
  writer_.flush(id_, rows);
}

void RunRecord::finish(store::RunStatus status, const std::string& error) {
  writer_.finish_run(id_, status, vocabulary::utc_now(), error);
}

bool RunRecord::finish_if_running(store::RunStatus status, const std::string& error) {
  return writer_.finish_if_running(id_, status, vocabulary::utc_now(), error);
}

std::filesystem::path RunRecord::spill(const Rows& to_spill, store::RunStatus status, const std::string& error) const {
  const auto path = spill_path(db_, id_);
  store::Writer side(path);
  const int64_t side_id = side.begin_run(info_);
  to_spill(side, side_id);
  side.finish_run(side_id, status, vocabulary::utc_now(), error);
  return path;
}

RunRecord::Stored RunRecord::store_final(const Rows& to_db, const Rows& to_spill, store::RunStatus status,
                                         std::string error, const Notice& notice) {
  Stored out{status, std::move(error), {}};
  try {
    writer_.require_same_file();  // a db deleted or replaced meanwhile: the results go to a side file
    store::Writer::Transaction tx(writer_);
    to_db(writer_, id_);
    writer_.finish_run(id_, out.status, vocabulary::utc_now(), out.error);
    tx.commit();
    return out;
  } catch (const std::exception& e) {
    const std::string why = e.what();
    tell(notice, fmt::format("\ntrainscope: could not store run {} in '{}': {}\n", id_, db_.string(), why));
    try {
      out.spill_file = spill(to_spill, out.status, out.error);
      tell(notice, fmt::format("trainscope: run {}'s results are kept whole in '{}'; merge them into the db with\n"
                               "  trainscope import '{}' --db '{}'\n",
                               id_, out.spill_file.string(), out.spill_file.string(), db_.string()));
    } catch (const std::exception& spill_error) {
      out.error += (out.error.empty() ? "" : "; ") + std::string("storing results: ") + why;
      tell(notice, fmt::format("trainscope: and could not write them to '{}' either: {}\n",
                               spill_path(db_, id_).string(), spill_error.what()));
      out.status = store::RunStatus::failed;
      try {  // at least the verdict, if the db takes it now
        finish(out.status, out.error);
      } catch (const std::exception&) {
      }
    }
  }
  return out;
}

bool RunRecord::finish_elsewhere(const std::filesystem::path& db, int64_t run_id, store::RunStatus status,
                                 const std::string& error, std::chrono::milliseconds lock_wait) {
  store::Writer writer(db, lock_wait);
  return writer.finish_if_running(run_id, status, vocabulary::utc_now(), error);
}

}  // namespace ts::session
