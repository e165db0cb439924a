#include "store/writer.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "store/liveness.h"
#include "store/open.h"
#include "store/timeline_index.h"

namespace ts::store {
namespace fs = std::filesystem;
using detail::Stmt;

namespace {
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

[[noreturn]] void io_error(std::string message) { throw StoreError(StoreError::Kind::io, std::move(message)); }

void require_writable(const fs::path& p, std::string_view what) {
  if (::access(p.c_str(), W_OK) != 0)
    io_error(fmt::format("{} '{}' is not writable: {}", what, p.string(), std::strerror(errno)));
}

// Names the system or SQLite cannot take fail only after a file was created, so they are refused
// first: SQLite keeps "-journal", "-wal" and "-shm" files beside the db under its name plus that
// suffix, and its VFS takes paths shorter than mxPathname (512 bytes on Unix).
void require_usable_name(const fs::path& path) {
  constexpr std::string_view kLongestSuffix = "-journal";
  std::error_code ec;
  const std::string full = fs::absolute(path, ec).string();
  if (ec) io_error(fmt::format("cannot resolve '{}': {}", path.string(), ec.message()));
  if (full.size() >= PATH_MAX)
    io_error(fmt::format("'{}...' is {} bytes long; paths are limited to {} bytes (PATH_MAX)", full.substr(0, 80),
                         full.size(), PATH_MAX - 1));
  for (const auto& part : fs::path(full)) {
    if (part.native().size() > NAME_MAX)
      io_error(fmt::format("'{}' has a name of {} bytes ('{}...'); names are limited to {} bytes (NAME_MAX)",
                           path.string(), part.native().size(), part.native().substr(0, 40), NAME_MAX));
  }
  // SQLite's own files beside a database: opened as a database, one would be replaced (issue 39).
  for (const std::string_view side : {"-wal", "-shm", "-journal"}) {
    if (path.filename().native().ends_with(side))
      io_error(fmt::format("'{}' ends in '{}', as the files SQLite keeps beside a database do; writing a database "
                           "there could destroy one: choose a name that does not",
                           path.string(), side));
  }
  if (const size_t name = path.filename().native().size(); name + kLongestSuffix.size() > NAME_MAX)
    io_error(fmt::format("the file name of '{}' is {} bytes; SQLite keeps files named like it plus '{}' beside it, "
                         "so a database name can have at most {} bytes",
                         path.string(), name, kLongestSuffix, NAME_MAX - kLongestSuffix.size()));
  const sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
  if (vfs != nullptr && full.size() >= static_cast<size_t>(vfs->mxPathname))
    io_error(fmt::format("'{}' is {} bytes long as an absolute path; SQLite takes database paths of at most {} bytes",
                         path.string(), full.size(), vfs->mxPathname - 1));
}

// Which file a path names (device and inode): a file replaced under the same name is another.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  bool operator==(const FileIdentity&) const = default;
};
std::optional<FileIdentity> identity_of(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{st.st_dev, st.st_ino};
}

}  // namespace

struct Writer::Impl {
  Impl(const fs::path& p, std::chrono::milliseconds lock_wait)
      : path(p), db(detail::open_for_write(p, lock_wait)), opened(identity_of(p)) {}

  fs::path path;
  detail::Db db;
  std::optional<FileIdentity> opened;  // the file as it was once open
  Stmt run_exists{db, "SELECT 1 FROM runs WHERE id = ?1"};
  Stmt string_find{db, "SELECT id FROM strings WHERE value = ?1"};
  Stmt string_insert{db, "INSERT INTO strings (value) VALUES (?1)"};
  // ?20 NULL: a new id.
  Stmt insert_run{db,
                  "INSERT INTO runs (workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
                  "parameter_count, started_at, command_line, config_json, status, host, boot_id, pid, pid_start, "
                  "heartbeat_interval_ms, heartbeat_ms, id, ranks, global_batch_size, uuid, progress_ms, framework) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'running', ?14, ?15, ?16, ?17, ?18, "
                  "?19, ?20, ?21, ?22, ?23, ?19, ?24)"};
  Stmt heartbeat{db, "UPDATE runs SET heartbeat_ms = ?2 WHERE id = ?1"};
  Stmt progress{db, "UPDATE runs SET progress_ms = ?2, stall_after_ms = ?3 WHERE id = ?1"};
  Stmt drop_memory{db, "DELETE FROM memory_timeline WHERE run_id = ?1"};
  Stmt drop_rank_memory{db, "DELETE FROM memory_timeline WHERE run_id = ?1 AND rank = ?2"};
  Stmt finish{db, "UPDATE runs SET status = ?2, ended_at = ?3, error = ?4 WHERE id = ?1"};
  Stmt finish_running{db,
                      "UPDATE runs SET status = ?2, ended_at = ?3, error = ?4 WHERE id = ?1 AND status = 'running'"};
  Stmt remove{db, "DELETE FROM runs WHERE id = ?1"};
  // Events written after a run's timeline index was built make it stale: readers then build
  // their own until the next final write (store/timeline.h).
  Stmt forget_timeline{db, "DELETE FROM timeline_index WHERE run_id = ?1"};
  void timeline_changed(int64_t run) {
    Stmt::Use use(forget_timeline);
    forget_timeline.bind(1, run).run();
  }
  Stmt environment{db, "INSERT INTO environment (run_id, key, value) VALUES (?1, ?2, ?3) "
                       "ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value"};
  Stmt iteration{db, "INSERT INTO iterations (run_id, idx, warmup, start_ns, end_ns, samples, loss, rank) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"};
  Stmt phase{db,
             "INSERT INTO phases (run_id, iteration, phase, start_ns, end_ns, rank) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
  Stmt event{db,
             "INSERT INTO events (run_id, start_ns, end_ns, name_id, layer_id, kind_id, pass_id, iteration, thread, "
             "rank) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"};
  Stmt layer{db, "INSERT INTO layers (run_id, layer, op_types, calls, forward_ns, backward_ns, activation_bytes, "
                 "parameter_count, gpu_forward_ns, gpu_backward_ns, median_per_iteration_ns, per_iteration_ns) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"};
  Stmt gpu_activity{
      db, "INSERT INTO gpu_activities (run_id, start_ns, end_ns, kind_id, name_id, detail_id, layer_id, op_id, "
          "pass_id, device, stream, correlation, iteration, bytes) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"};
  Stmt gpu_breakdown{db, "INSERT INTO gpu_breakdown (run_id, device, iteration, start_ns, end_ns, compute_ns, comm_ns, "
                         "memcpy_ns, memset_ns, overlap_ns, exposed_comm_ns, busy_ns, idle_ns, rank) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"};
  Stmt copy{db,
            "INSERT INTO copy_summary (run_id, device, name, count, bytes, total_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
  Stmt kernel{db,
              "INSERT INTO kernel_summary (run_id, device, name, count, total_ns, mean_ns, median_ns, min_ns, max_ns, "
              "inclusive_ns, median_per_iteration_ns, per_iteration_ns) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"};
  Stmt memory{db,
              "INSERT INTO memory_timeline (run_id, t_ns, category_id, live_bytes, rank) VALUES (?1, ?2, ?3, ?4, ?5)"};
  Stmt peak{db, "INSERT INTO memory_peak (run_id, category, bytes, t_ns, rank) VALUES (?1, ?2, ?3, ?4, ?5)"};
  Stmt memory_change{db, "INSERT INTO memory_changes (run_id, rank, t_ns, category_id, owner_id, delta) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
  Stmt metric{db, "INSERT INTO metrics (run_id, name, value, unit, iteration, rank) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
  Stmt sample{db, "INSERT INTO samples (run_id, t_ns, name, value, rank) VALUES (?1, ?2, ?3, ?4, ?5)"};
  // Distribution (schema v4).
  Stmt collective{db, "INSERT INTO collectives (run_id, rank, iteration, thread, collective, label, bytes, start_ns, "
                      "end_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"};
  Stmt rank_clock{db,
                  "INSERT INTO rank_clocks (run_id, rank, phase, offset_ns, uncertainty_ns, at_ns, min_round_trip_ns, "
                  "pings) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"};
  Stmt collective_wait{db, "INSERT INTO collective_waits (run_id, rank, iteration, collective, label, call, bytes, "
                           "arrival_ns, last_arrival_ns, last_rank, waiting_ns, moving_ns, uncertainty_ns) VALUES (?1, "
                           "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"};
  Stmt comm_op{
      db, "INSERT INTO comm_ops (run_id, rank, backend, collective, bytes, ranks, count, total_ns, mean_ns, "
          "min_ns, max_ns, algbw_gbps, busbw_gbps) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"};
  Stmt rank_breakdown{db, "INSERT INTO rank_breakdown (run_id, rank, iteration, start_ns, end_ns, compute_ns, comm_ns, "
                          "overlap_ns, exposed_comm_ns, idle_ns, backward_wait_ns, pull_wait_ns, push_wait_ns) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"};
  Stmt collective_bench{
      db, "INSERT INTO collective_bench (run_id, backend, collective, bytes, ranks, iterations, time_ns, "
          "algbw_gbps, busbw_gbps, min_time_ns, max_time_ns, bus_factor, p50_ns, p99_ns, samples, beside_rate, "
          "beside_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"};
  Stmt collective_bench_samples{db, "INSERT INTO collective_bench_samples (run_id, collective, bytes, rank, time_ns) "
                                    "VALUES (?1, ?2, ?3, ?4, ?5)"};
  // Parameter servers (schema v6).
  Stmt ps_staleness{db, "INSERT INTO ps_staleness (run_id, rank, iteration, kind, staleness, count) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
  Stmt ps_server{db,
                 "INSERT INTO ps_servers (run_id, server, rank, keys, bytes_held, bytes_in, bytes_out, pushes, pulls, "
                 "updates, busy_ns, queue_max, queue_mean) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"};
  // Projections (schema v15).
  Stmt gradient{db, "INSERT INTO gradients (run_id, rank, grp, slot, name, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
  // ?14 left unbound (Stmt::Use clears the bindings): NULL, no error.
  Stmt projection{db, "INSERT INTO projections (run_id, source_run_id, sweep_run_id, measured_run_id, strategy, ranks, "
                      "link, latency_ns, bandwidth_gbps, knobs_json, model_json, projected_ns, measured_ns, error, "
                      "created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"};

  // Committed string ids; entries added by a transaction that rolls back are dropped (clear()).
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> strings;

  int64_t intern(std::string_view s) {
    if (auto it = strings.find(s); it != strings.end()) return it->second;
    int64_t id = 0;
    {
      Stmt::Use use(string_find);
      if (string_find.bind(1, s).step()) id = string_find.col_int(0);
    }
    if (id == 0) {
      Stmt::Use use(string_insert);
      string_insert.bind(1, s).run();
      id = db.last_insert_id();
    }
    strings.emplace(std::string(s), id);
    return id;
  }

  void require_run(int64_t run) {
    Stmt::Use use(run_exists);
    if (!run_exists.bind(1, run).step())
      throw StoreError(StoreError::Kind::not_found, fmt::format("no run with id {}", run));
  }

  // Inside Writer::Transaction: bulk() then writes into it instead of committing chunks itself.
  bool in_transaction = false;

  template <class Row, class BindRow>
  void insert(int64_t run, std::span<const Row> rows, Stmt& stmt, BindRow bind_row) {
    Stmt::Use use(stmt);
    stmt.bind(1, run);
    for (const Row& row : rows) {
      bind_row(stmt, row);  // binds every other parameter, so nothing stale is left over
      stmt.run();
      stmt.rearm();
    }
  }

  // Inserts rows in transactions of kChunkRows; bind_row binds parameters ?2.. of `stmt`.
  template <class Row, class BindRow>
  void bulk(int64_t run, std::span<const Row> rows, Stmt& stmt, BindRow bind_row) {
    if (rows.empty()) return;
    require_run(run);
    if (in_transaction) return insert(run, rows, stmt, bind_row);
    for (size_t begin = 0; begin < rows.size(); begin += kChunkRows) {
      const auto chunk = rows.subspan(begin, std::min(kChunkRows, rows.size() - begin));
      try {
        detail::Transaction tx(db);
        insert(run, chunk, stmt, bind_row);
        tx.commit();
      } catch (...) {
        strings.clear();
        throw;
      }
    }
  }
};

Writer::Transaction::Transaction(Writer& writer) : writer_(writer) {
  Impl& im = *writer_.impl_;
  if (im.in_transaction) throw std::logic_error("store: Writer::Transaction is not nestable");
  im.db.exec("BEGIN IMMEDIATE");
  im.in_transaction = true;
}

Writer::Transaction::~Transaction() {
  if (done_) return;
  Impl& im = *writer_.impl_;
  sqlite3_exec(im.db.get(), "ROLLBACK", nullptr, nullptr, nullptr);  // best effort while unwinding
  im.in_transaction = false;
  im.strings.clear();  // ids interned inside were rolled back with it
}

void Writer::Transaction::commit() {
  Impl& im = *writer_.impl_;
  im.db.exec("COMMIT");
  im.in_transaction = false;
  done_ = true;
}

Writer::Writer(const fs::path& path, std::chrono::milliseconds lock_wait)
    : impl_(std::make_unique<Impl>(path, lock_wait)) {}
Writer::~Writer() = default;
Writer::Writer(Writer&&) noexcept = default;
Writer& Writer::operator=(Writer&&) noexcept = default;

void Writer::check_integrity() {
  // Once per file per process: a suite's runs share one check.
  static std::mutex mutex;
  static std::set<std::pair<dev_t, ino_t>> checked;
  if (!impl_->opened) return;
  const std::pair<dev_t, ino_t> key{impl_->opened->device, impl_->opened->inode};
  {
    std::lock_guard lock(mutex);
    if (checked.contains(key)) return;
  }
  const std::string verdict = impl_->db.query_text("PRAGMA quick_check(1)");
  if (verdict != "ok") {
    throw StoreError(StoreError::Kind::corrupt,
                     fmt::format("'{}' fails SQLite's quick_check ({}): refusing to write into a damaged db; restore "
                                 "it from a copy, or write to another --db",
                                 impl_->path.string(), verdict));
  }
  std::lock_guard lock(mutex);
  checked.insert(key);
}

void Writer::require_same_file() const {
  const auto now = identity_of(impl_->path);
  if (!now) {
    io_error(fmt::format("'{}' was removed while this run was written: writing into it would go to a file no one "
                         "can open",
                         impl_->path.string()));
  }
  if (impl_->opened && *now != *impl_->opened) {
    io_error(fmt::format("'{}' was replaced by another file while this run was written: its results do not go into "
                         "a file they were not streamed to",
                         impl_->path.string()));
  }
}

void Writer::check_target(const fs::path& path) {
  if (!path.empty()) require_usable_name(path);
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (fs::exists(status)) {
    if (fs::is_directory(status)) io_error(fmt::format("'{}' is a directory, not a database file", path.string()));
    detail::inspect(path, /*immutable=*/true);
    require_writable(path, "database file");
    require_writable(fs::absolute(path).parent_path(), "directory");  // WAL needs -wal / -shm next to it
    return;
  }
  if (path.empty() || !path.has_filename())
    io_error(fmt::format("'{}' names a directory, not a database file", path.string()));
  fs::path dir = fs::absolute(path).parent_path();
  while (!fs::exists(dir, ec) && dir.has_relative_path()) dir = dir.parent_path();
  if (!fs::is_directory(dir, ec))
    io_error(fmt::format("cannot create '{}': '{}' is not a directory", path.string(), dir.string()));
  require_writable(dir, "directory");
}

int64_t Writer::begin_run(const RunInfo& info, int64_t id) {
  auto& s = impl_->insert_run;
  Stmt::Use use(s);
  s.bind(1, info.workload).bind(2, info.preset).bind(3, info.device).bind(4, info.batch_size);
  s.bind(5, info.iterations).bind(6, info.warmup).bind(7, info.threads).bind(8, std::bit_cast<int64_t>(info.seed));
  s.bind(9, info.trace).bind(10, info.parameter_count).bind(11, info.started_at).bind(12, info.command_line);
  s.bind(13, info.config_json).bind(14, info.host).bind(15, info.boot_id).bind(16, info.pid).bind(17, info.pid_start);
  s.bind(18, info.heartbeat_interval_ms).bind(19, info.heartbeat_interval_ms > 0 ? unix_time_ms() : int64_t{0});
  if (id > 0) s.bind(20, id);  // else NULL: SQLite picks the next id
  s.bind(21, info.ranks).bind(22, info.global_batch_size != 0 ? info.global_batch_size : info.batch_size * info.ranks);
  s.bind(23, info.uuid.empty() ? new_run_uuid() : info.uuid);
  s.bind(24, info.framework.empty() ? std::string("trainscope") : info.framework);
  s.run();
  return impl_->db.last_insert_id();
}

void Writer::flush(int64_t run, const RunFlush& rows) {
  Impl& im = *impl_;
  in_one_transaction([&] {
    im.require_run(run);
    add_iterations(run, rows.iterations);
    add_phases(run, rows.phases);
    add_events(run, rows.events);
    add_memory_timeline(run, rows.memory);
    add_samples(run, rows.samples);
    add_collectives(run, rows.collectives);
    if (rows.progress_ms != 0) {
      Stmt::Use use(im.progress);
      im.progress.bind(1, run).bind(2, rows.progress_ms).bind(3, rows.stall_after_ms).run();
    }
    if (rows.heartbeat_ms == 0) return;  // no heartbeat to record: the last one stays
    Stmt::Use use(im.heartbeat);
    im.heartbeat.bind(1, run).bind(2, rows.heartbeat_ms).run();
  });
}

void Writer::replace_memory_timeline(int64_t run, std::span<const MemoryPoint> rows, std::optional<int64_t> rank) {
  Impl& im = *impl_;
  in_one_transaction([&] {
    im.require_run(run);
    if (rank) {
      Stmt::Use use(im.drop_rank_memory);
      im.drop_rank_memory.bind(1, run).bind(2, *rank).run();
    } else {
      Stmt::Use use(im.drop_memory);
      im.drop_memory.bind(1, run).run();
    }
    add_memory_timeline(run, rows);
  });
}

void Writer::in_one_transaction(const std::function<void()>& write) {
  if (impl_->in_transaction) return write();
  Transaction tx(*this);
  write();
  tx.commit();
}

void Writer::finish_run(int64_t run, RunStatus status, std::string_view ended_at, std::string_view error) {
  in_one_transaction([&] {
    auto& s = impl_->finish;
    Stmt::Use use(s);
    s.bind(1, run).bind(2, to_string(status)).bind(3, ended_at).bind(4, error).run();
    if (impl_->db.changes() == 0) throw StoreError(StoreError::Kind::not_found, fmt::format("no run with id {}", run));
    // The final write: the viewer's level of detail over everything the run traced.
    detail::build_timeline_index(impl_->db, impl_->db, run);
  });
}

bool Writer::finish_if_running(int64_t run, RunStatus status, std::string_view ended_at, std::string_view error) {
  auto& s = impl_->finish_running;
  Stmt::Use use(s);
  s.bind(1, run).bind(2, to_string(status)).bind(3, ended_at).bind(4, error).run();
  return impl_->db.changes() > 0;
}

void Writer::delete_run(int64_t run) {
  auto& s = impl_->remove;
  Stmt::Use use(s);
  s.bind(1, run).run();  // children go with ON DELETE CASCADE; interned strings stay
  if (impl_->db.changes() == 0) throw StoreError(StoreError::Kind::not_found, fmt::format("no run with id {}", run));
}

void Writer::add_environment(int64_t run, std::span<const EnvEntry> rows) {
  impl_->bulk(run, rows, impl_->environment, [](Stmt& s, const EnvEntry& r) { s.bind(2, r.key).bind(3, r.value); });
}

void Writer::add_iterations(int64_t run, std::span<const IterationRow> rows) {
  impl_->bulk(run, rows, impl_->iteration, [](Stmt& s, const IterationRow& r) {
    s.bind(2, r.index).bind(3, r.warmup).bind(4, r.start_ns).bind(5, r.end_ns).bind(6, r.samples).bind(7, r.loss);
    s.bind(8, r.rank);
  });
}

void Writer::add_phases(int64_t run, std::span<const PhaseRow> rows) {
  impl_->bulk(run, rows, impl_->phase, [](Stmt& s, const PhaseRow& r) {
    s.bind(2, r.iteration).bind(3, r.phase).bind(4, r.start_ns).bind(5, r.end_ns).bind(6, r.rank);
  });
}

void Writer::add_events(int64_t run, std::span<const EventRow> rows) {
  Impl& im = *impl_;
  if (!rows.empty()) im.timeline_changed(run);
  im.bulk(run, rows, im.event, [&im](Stmt& s, const EventRow& r) {
    // Interning runs other statements, so resolve ids before binding this one.
    const int64_t name = im.intern(r.name), layer = im.intern(r.layer), kind = im.intern(r.kind),
                  pass = im.intern(r.pass);
    s.bind(2, r.start_ns).bind(3, r.end_ns).bind(4, name).bind(5, layer).bind(6, kind).bind(7, pass);
    s.bind(8, r.iteration).bind(9, r.thread).bind(10, r.rank);
  });
}

void Writer::add_layers(int64_t run, std::span<const LayerRow> rows) {
  impl_->bulk(run, rows, impl_->layer, [](Stmt& s, const LayerRow& r) {
    s.bind(2, r.layer).bind(3, r.op_types).bind(4, r.calls).bind(5, r.forward_ns).bind(6, r.backward_ns);
    s.bind(7, r.activation_bytes).bind(8, r.parameter_count).bind(9, r.gpu_forward_ns).bind(10, r.gpu_backward_ns);
    s.bind(11, r.median_per_iteration_ns).bind(12, encode_series(r.per_iteration_ns));
  });
}

void Writer::add_gpu_activities(int64_t run, std::span<const GpuActivityRow> rows) {
  Impl& im = *impl_;
  if (!rows.empty()) im.timeline_changed(run);
  im.bulk(run, rows, im.gpu_activity, [&im](Stmt& s, const GpuActivityRow& r) {
    const int64_t kind = im.intern(r.kind), name = im.intern(r.name), detail = im.intern(r.detail),
                  layer = im.intern(r.layer), op = im.intern(r.op), pass = im.intern(r.pass);
    s.bind(2, r.start_ns).bind(3, r.end_ns).bind(4, kind).bind(5, name).bind(6, detail).bind(7, layer).bind(8, op);
    s.bind(9, pass).bind(10, r.device).bind(11, r.stream).bind(12, r.correlation).bind(13, r.iteration);
    s.bind(14, r.bytes);
  });
}

void Writer::add_gpu_breakdown(int64_t run, std::span<const GpuBreakdownRow> rows) {
  impl_->bulk(run, rows, impl_->gpu_breakdown, [](Stmt& s, const GpuBreakdownRow& r) {
    s.bind(2, r.device).bind(3, r.iteration).bind(4, r.start_ns).bind(5, r.end_ns).bind(6, r.compute_ns);
    s.bind(7, r.comm_ns).bind(8, r.memcpy_ns).bind(9, r.memset_ns).bind(10, r.overlap_ns);
    s.bind(11, r.exposed_comm_ns).bind(12, r.busy_ns).bind(13, r.idle_ns).bind(14, r.rank);
  });
}

void Writer::add_copy_summary(int64_t run, std::span<const CopySummaryRow> rows) {
  impl_->bulk(run, rows, impl_->copy, [](Stmt& s, const CopySummaryRow& r) {
    s.bind(2, r.device).bind(3, r.name).bind(4, r.count).bind(5, r.bytes).bind(6, r.total_ns);
  });
}

void Writer::add_op_summary(int64_t run, std::span<const OpSummaryRow> rows) {
  impl_->bulk(run, rows, impl_->kernel, [](Stmt& s, const OpSummaryRow& r) {
    s.bind(2, r.device).bind(3, r.name).bind(4, r.count).bind(5, r.total_ns).bind(6, r.mean_ns);
    s.bind(7, r.median_ns).bind(8, r.min_ns).bind(9, r.max_ns).bind(10, r.inclusive_ns);
    s.bind(11, r.median_per_iteration_ns).bind(12, encode_series(r.per_iteration_ns));
  });
}

void Writer::add_memory_timeline(int64_t run, std::span<const MemoryPoint> rows) {
  Impl& im = *impl_;
  im.bulk(run, rows, im.memory, [&im](Stmt& s, const MemoryPoint& r) {
    const int64_t category = im.intern(r.category);
    s.bind(2, r.t_ns).bind(3, category).bind(4, r.live_bytes).bind(5, r.rank);
  });
}

void Writer::add_memory_peak(int64_t run, std::span<const MemoryPeakRow> rows) {
  impl_->bulk(run, rows, impl_->peak, [](Stmt& s, const MemoryPeakRow& r) {
    s.bind(2, r.category).bind(3, r.bytes).bind(4, r.t_ns).bind(5, r.rank);
  });
}

void Writer::add_memory_changes(int64_t run, std::span<const MemoryChangeRow> rows) {
  Impl& im = *impl_;
  im.bulk(run, rows, im.memory_change, [&im](Stmt& s, const MemoryChangeRow& r) {
    const int64_t category = im.intern(r.category), owner = im.intern(r.owner);
    s.bind(2, r.rank).bind(3, r.t_ns).bind(4, category).bind(5, owner).bind(6, r.delta);
  });
}

void Writer::add_metrics(int64_t run, std::span<const MetricRow> rows) {
  impl_->bulk(run, rows, impl_->metric, [](Stmt& s, const MetricRow& r) {
    s.bind(2, r.name).bind(3, r.value).bind(4, r.unit).bind(5, r.iteration).bind(6, r.rank);
  });
}

void Writer::add_samples(int64_t run, std::span<const SampleRow> rows) {
  impl_->bulk(run, rows, impl_->sample,
              [](Stmt& s, const SampleRow& r) { s.bind(2, r.t_ns).bind(3, r.name).bind(4, r.value).bind(5, r.rank); });
}

void Writer::add_collectives(int64_t run, std::span<const CollectiveRow> rows) {
  impl_->bulk(run, rows, impl_->collective, [](Stmt& s, const CollectiveRow& r) {
    s.bind(2, r.rank).bind(3, r.iteration).bind(4, r.thread).bind(5, r.collective).bind(6, r.label);
    s.bind(7, r.bytes).bind(8, r.start_ns).bind(9, r.end_ns);
  });
}

void Writer::add_comm_ops(int64_t run, std::span<const CommOpRow> rows) {
  impl_->bulk(run, rows, impl_->comm_op, [](Stmt& s, const CommOpRow& r) {
    s.bind(2, r.rank).bind(3, r.backend).bind(4, r.collective).bind(5, r.bytes).bind(6, r.ranks).bind(7, r.count);
    s.bind(8, r.total_ns).bind(9, r.mean_ns).bind(10, r.min_ns).bind(11, r.max_ns).bind(12, r.algbw_gbps);
    s.bind(13, r.busbw_gbps);
  });
}

void Writer::add_rank_clocks(int64_t run, std::span<const RankClockRow> rows) {
  impl_->bulk(run, rows, impl_->rank_clock, [](Stmt& s, const RankClockRow& r) {
    s.bind(2, r.rank).bind(3, r.phase).bind(4, r.offset_ns).bind(5, r.uncertainty_ns).bind(6, r.at_ns);
    s.bind(7, r.min_round_trip_ns).bind(8, r.pings);
  });
}

void Writer::add_collective_waits(int64_t run, std::span<const CollectiveWaitRow> rows) {
  impl_->bulk(run, rows, impl_->collective_wait, [](Stmt& s, const CollectiveWaitRow& r) {
    s.bind(2, r.rank).bind(3, r.iteration).bind(4, r.collective).bind(5, r.label).bind(6, r.call).bind(7, r.bytes);
    s.bind(8, r.arrival_ns).bind(9, r.last_arrival_ns).bind(10, r.last_rank).bind(11, r.waiting_ns);
    s.bind(12, r.moving_ns).bind(13, r.uncertainty_ns);
  });
}

void Writer::add_rank_breakdown(int64_t run, std::span<const RankBreakdownRow> rows) {
  impl_->bulk(run, rows, impl_->rank_breakdown, [](Stmt& s, const RankBreakdownRow& r) {
    s.bind(2, r.rank).bind(3, r.iteration).bind(4, r.start_ns).bind(5, r.end_ns).bind(6, r.compute_ns);
    s.bind(7, r.comm_ns).bind(8, r.overlap_ns).bind(9, r.exposed_comm_ns).bind(10, r.idle_ns);
    s.bind(11, r.backward_wait_ns).bind(12, r.pull_wait_ns).bind(13, r.push_wait_ns);
  });
}

void Writer::add_collective_bench(int64_t run, std::span<const CollectiveBenchRow> rows) {
  impl_->bulk(run, rows, impl_->collective_bench, [](Stmt& s, const CollectiveBenchRow& r) {
    s.bind(2, r.backend).bind(3, r.collective).bind(4, r.bytes).bind(5, r.ranks).bind(6, r.iterations);
    s.bind(7, r.time_ns).bind(8, r.algbw_gbps).bind(9, r.busbw_gbps).bind(10, r.min_time_ns);
    s.bind(11, r.max_time_ns).bind(12, r.bus_factor).bind(13, r.p50_ns).bind(14, r.p99_ns).bind(15, r.samples);
    s.bind(16, r.beside_rate).bind(17, r.beside_ns);
  });
}

void Writer::add_collective_bench_samples(int64_t run, std::span<const CollectiveBenchSamplesRow> rows) {
  impl_->bulk(run, rows, impl_->collective_bench_samples, [](Stmt& s, const CollectiveBenchSamplesRow& r) {
    s.bind(2, r.collective).bind(3, r.bytes).bind(4, r.rank).bind(5, encode_series(r.time_ns));
  });
}

void Writer::add_ps_staleness(int64_t run, std::span<const PsStalenessRow> rows) {
  impl_->bulk(run, rows, impl_->ps_staleness, [](Stmt& s, const PsStalenessRow& r) {
    s.bind(2, r.rank).bind(3, r.iteration).bind(4, r.kind).bind(5, r.staleness).bind(6, r.count);
  });
}

void Writer::add_ps_servers(int64_t run, std::span<const PsServerRow> rows) {
  impl_->bulk(run, rows, impl_->ps_server, [](Stmt& s, const PsServerRow& r) {
    s.bind(2, r.server).bind(3, r.rank).bind(4, r.keys).bind(5, r.bytes_held).bind(6, r.bytes_in);
    s.bind(7, r.bytes_out).bind(8, r.pushes).bind(9, r.pulls).bind(10, r.updates).bind(11, r.busy_ns);
    s.bind(12, r.queue_max).bind(13, r.queue_mean);
  });
}

void Writer::add_gradients(int64_t run, std::span<const GradientRow> rows) {
  impl_->bulk(run, rows, impl_->gradient, [](Stmt& s, const GradientRow& r) {
    s.bind(2, r.rank).bind(3, r.group).bind(4, r.slot).bind(5, r.name).bind(6, r.bytes);
  });
}

int64_t Writer::add_projection(const ProjectionRow& row) {
  Impl& im = *impl_;
  int64_t id = 0;
  in_one_transaction([&] {
    im.require_run(row.run_id);
    auto& s = im.projection;
    Stmt::Use use(s);
    s.bind(1, row.run_id).bind(2, row.source_run_id).bind(3, row.sweep_run_id).bind(4, row.measured_run_id);
    s.bind(5, row.strategy).bind(6, row.ranks).bind(7, row.link).bind(8, row.latency_ns).bind(9, row.bandwidth_gbps);
    s.bind(10, row.knobs_json).bind(11, row.model_json).bind(12, row.projected_ns).bind(13, row.measured_ns);
    if (row.error) s.bind(14, *row.error);
    s.bind(15, row.created_at);
    s.run();
    id = im.db.last_insert_id();
  });
  return id;
}

}  // namespace ts::store
