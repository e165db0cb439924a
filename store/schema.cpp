// Schema definition, migrations and file identification (docs/schema.md).
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <fstream>
#include <system_error>

#include "store/open.h"
#include "store/schema.h"

namespace ts::store::detail {
namespace fs = std::filesystem;
namespace {

// Step i upgrades user_version i -> i + 1 and runs inside the migration transaction.
// Never edit a released step: add a new one and bump kSchemaVersion.
constexpr std::string_view kV0ToV1 = R"sql(
CREATE TABLE runs (
  id              INTEGER PRIMARY KEY,
  workload        TEXT    NOT NULL,
  preset          TEXT    NOT NULL,
  device          TEXT    NOT NULL,
  batch_size      INTEGER NOT NULL,
  iterations      INTEGER NOT NULL,
  warmup          INTEGER NOT NULL,
  threads         INTEGER NOT NULL,
  seed            INTEGER NOT NULL,
  trace           INTEGER NOT NULL,
  parameter_count INTEGER NOT NULL,
  started_at      TEXT    NOT NULL,
  command_line    TEXT    NOT NULL,
  config_json     TEXT    NOT NULL,
  status          TEXT    NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
  ended_at        TEXT    NOT NULL DEFAULT '',
  error           TEXT    NOT NULL DEFAULT ''
);
CREATE TABLE environment (
  id     INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key    TEXT    NOT NULL,
  value  TEXT    NOT NULL,
  UNIQUE (run_id, key)
);
CREATE TABLE iterations (
  id       INTEGER PRIMARY KEY,
  run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  idx      INTEGER NOT NULL,
  warmup   INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns   INTEGER NOT NULL,
  samples  INTEGER NOT NULL,
  loss     REAL    NOT NULL
);
CREATE INDEX iterations_run ON iterations(run_id, idx);
CREATE TABLE phases (
  id        INTEGER PRIMARY KEY,
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  iteration INTEGER NOT NULL,
  phase     TEXT    NOT NULL,
  start_ns  INTEGER NOT NULL,
  end_ns    INTEGER NOT NULL
);
CREATE INDEX phases_run ON phases(run_id, iteration, start_ns);
CREATE TABLE strings (
  id    INTEGER PRIMARY KEY,
  value TEXT NOT NULL UNIQUE
);
CREATE TABLE events (
  id        INTEGER PRIMARY KEY,
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  start_ns  INTEGER NOT NULL,
  end_ns    INTEGER NOT NULL,
  name_id   INTEGER NOT NULL,
  layer_id  INTEGER NOT NULL,
  kind_id   INTEGER NOT NULL,
  pass_id   INTEGER NOT NULL,
  iteration INTEGER NOT NULL,
  thread    INTEGER NOT NULL
);
CREATE INDEX events_run_start ON events(run_id, start_ns);
CREATE TABLE layers (
  id               INTEGER PRIMARY KEY,
  run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  layer            TEXT    NOT NULL,
  op_types         TEXT    NOT NULL,
  calls            INTEGER NOT NULL,
  forward_ns       REAL    NOT NULL,
  backward_ns      REAL    NOT NULL,
  activation_bytes INTEGER NOT NULL,
  parameter_count  INTEGER NOT NULL
);
CREATE INDEX layers_run ON layers(run_id);
CREATE TABLE kernel_summary (
  id        INTEGER PRIMARY KEY,
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  device    TEXT    NOT NULL,
  name      TEXT    NOT NULL,
  count     INTEGER NOT NULL,
  total_ns  INTEGER NOT NULL,
  mean_ns   REAL    NOT NULL,
  median_ns REAL    NOT NULL,
  min_ns    INTEGER NOT NULL,
  max_ns    INTEGER NOT NULL
);
CREATE INDEX kernel_summary_run ON kernel_summary(run_id, device);
CREATE TABLE memory_timeline (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  t_ns        INTEGER NOT NULL,
  category_id INTEGER NOT NULL,
  live_bytes  INTEGER NOT NULL
);
CREATE INDEX memory_timeline_run ON memory_timeline(run_id, t_ns);
CREATE TABLE memory_peak (
  id       INTEGER PRIMARY KEY,
  run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  category TEXT    NOT NULL,
  bytes    INTEGER NOT NULL,
  t_ns     INTEGER NOT NULL
);
CREATE INDEX memory_peak_run ON memory_peak(run_id);
CREATE TABLE metrics (
  id        INTEGER PRIMARY KEY,
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name      TEXT    NOT NULL,
  value     REAL    NOT NULL,
  unit      TEXT    NOT NULL,
  iteration INTEGER NOT NULL
);
CREATE INDEX metrics_run ON metrics(run_id, name);
CREATE TABLE samples (
  id     INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  t_ns   INTEGER NOT NULL,
  name   TEXT    NOT NULL,
  value  REAL    NOT NULL
);
CREATE INDEX samples_run ON samples(run_id, t_ns);
)sql";

// v2: the GPU profiler's tables (issue 4) and the GPU side of the per-layer summary.
constexpr std::string_view kV1ToV2 = R"sql(
CREATE TABLE gpu_activities (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER NOT NULL,
  kind_id     INTEGER NOT NULL,
  name_id     INTEGER NOT NULL,
  detail_id   INTEGER NOT NULL,
  layer_id    INTEGER NOT NULL,
  op_id       INTEGER NOT NULL,
  pass_id     INTEGER NOT NULL,
  device      INTEGER NOT NULL,
  stream      INTEGER NOT NULL,
  correlation INTEGER NOT NULL,
  iteration   INTEGER NOT NULL,
  bytes       INTEGER NOT NULL
);
CREATE INDEX gpu_activities_run_start ON gpu_activities(run_id, start_ns);
CREATE TABLE gpu_breakdown (
  id              INTEGER PRIMARY KEY,
  run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  device          INTEGER NOT NULL,
  iteration       INTEGER NOT NULL,
  start_ns        INTEGER NOT NULL,
  end_ns          INTEGER NOT NULL,
  compute_ns      INTEGER NOT NULL,
  comm_ns         INTEGER NOT NULL,
  memcpy_ns       INTEGER NOT NULL,
  memset_ns       INTEGER NOT NULL,
  overlap_ns      INTEGER NOT NULL,
  exposed_comm_ns INTEGER NOT NULL,
  busy_ns         INTEGER NOT NULL,
  idle_ns         INTEGER NOT NULL
);
CREATE INDEX gpu_breakdown_run ON gpu_breakdown(run_id, device, iteration);
CREATE TABLE copy_summary (
  id       INTEGER PRIMARY KEY,
  run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  device   TEXT    NOT NULL,
  name     TEXT    NOT NULL,
  count    INTEGER NOT NULL,
  bytes    INTEGER NOT NULL,
  total_ns INTEGER NOT NULL
);
CREATE INDEX copy_summary_run ON copy_summary(run_id);
ALTER TABLE layers ADD COLUMN gpu_forward_ns REAL NOT NULL DEFAULT 0;
ALTER TABLE layers ADD COLUMN gpu_backward_ns REAL NOT NULL DEFAULT 0;
)sql";

constexpr std::array<std::string_view, kSchemaVersion> kMigrations = {kV0ToV1, kV1ToV2};

// Reads the identity pragmas and throws unless the file is ours (or empty) and not newer.
FileInfo identify(Db& db, const fs::path& path) {
  try {
    const auto app = static_cast<int32_t>(db.query_int("PRAGMA application_id"));
    const auto version = static_cast<int>(db.query_int("PRAGMA user_version"));
    const int64_t objects = db.query_int("SELECT count(*) FROM sqlite_master");
    if (app != kApplicationId) {
      if (app == 0 && version == 0 && objects == 0) return {0, true};
      throw StoreError(StoreError::Kind::not_trainscope,
                       fmt::format("'{}' is a SQLite database of another application (application_id {:#x}, "
                                   "expected {:#x} 'TSCP'); refusing to touch it",
                                   path.string(), static_cast<uint32_t>(app), kApplicationId));
    }
    if (version > kSchemaVersion)
      throw StoreError(StoreError::Kind::newer_schema,
                       fmt::format("'{}' has schema version {}, but this trainscope supports versions up to {}; "
                                   "use a newer trainscope",
                                   path.string(), version, kSchemaVersion));
    return {version, objects == 0};
  } catch (const StoreError& e) {
    if (std::string_view(e.what()).find(path.string()) != std::string_view::npos) throw;
    throw StoreError(e.kind(), fmt::format("'{}': {}", path.string(), e.what()));
  }
}

// Non-SQLite files are rejected by their header before SQLite gets to see them.
FileInfo precheck(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec) throw StoreError(StoreError::Kind::io, fmt::format("cannot stat '{}': {}", path.string(), ec.message()));
  if (fs::is_directory(status))
    throw StoreError(StoreError::Kind::io, fmt::format("'{}' is a directory, not a database file", path.string()));
  const auto size = fs::file_size(path, ec);
  if (ec) throw StoreError(StoreError::Kind::io, fmt::format("cannot read '{}': {}", path.string(), ec.message()));
  if (size == 0) return {0, true};
  std::array<char, 16> header{};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw StoreError(StoreError::Kind::io, fmt::format("cannot open '{}' for reading", path.string()));
  in.read(header.data(), header.size());
  if (in.gcount() != static_cast<std::streamsize>(header.size()) ||
      std::string_view(header.data(), header.size()) != std::string_view("SQLite format 3\0", 16))
    throw StoreError(StoreError::Kind::not_trainscope,
                     fmt::format("'{}' is not a SQLite database (and so not a trainscope database)", path.string()));
  return {0, false};
}

std::string file_uri(const fs::path& path, std::string_view query) {
  std::string uri = "file:";
  for (unsigned char c : fs::absolute(path).string()) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~')
      uri += static_cast<char>(c);
    else
      uri += fmt::format("%{:02X}", c);
  }
  uri += '?';
  uri += query;
  return uri;
}

}  // namespace

std::string_view migration_sql(int from_version) { return kMigrations.at(static_cast<size_t>(from_version)); }

FileInfo inspect(const fs::path& path, bool immutable) {
  if (precheck(path).empty) return {0, true};
  Db db = immutable ? Db(file_uri(path, "mode=ro&immutable=1"), SQLITE_OPEN_READONLY, true)
                    : Db(path.string(), SQLITE_OPEN_READONLY);
  return identify(db, path);
}

Db open_for_write(const fs::path& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) {
    inspect(path, false);  // throws for foreign / newer files before anything is written
  } else if (path.has_parent_path()) {
    fs::create_directories(path.parent_path(), ec);
    if (ec)
      throw StoreError(StoreError::Kind::io, fmt::format("cannot create directory '{}': {}",
                                                         path.parent_path().string(), ec.message()));
  }
  Db db(path.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db.exec("PRAGMA foreign_keys = ON");
  if (const std::string mode = db.query_text("PRAGMA journal_mode = WAL"); mode != "wal")
    throw StoreError(StoreError::Kind::io,
                     fmt::format("'{}': cannot switch to WAL mode (journal_mode is '{}')", path.string(), mode));
  db.exec("PRAGMA synchronous = NORMAL");  // WAL + NORMAL: durable against process crashes
  db.exec("PRAGMA cache_size = -65536");   // 64 MiB page cache for bulk index maintenance

  Transaction tx(db);
  const FileInfo info = identify(db, path);  // again, under the write lock
  for (int v = info.version; v < kSchemaVersion; ++v) {
    db.exec(kMigrations[static_cast<size_t>(v)]);
    db.exec(fmt::format("PRAGMA user_version = {}", v + 1));
  }
  if (info.version < kSchemaVersion) db.exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
  tx.commit();
  return db;
}

Db open_for_read(const fs::path& path, int& version) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw StoreError(StoreError::Kind::not_found, fmt::format("no database at '{}'", path.string()));
  if (precheck(path).empty)
    throw StoreError(StoreError::Kind::not_trainscope,
                     fmt::format("'{}' is empty: no trainscope schema yet (version 0)", path.string()));
  Db db(path.string(), SQLITE_OPEN_READONLY);
  const FileInfo info = identify(db, path);
  if (info.empty)
    throw StoreError(StoreError::Kind::not_trainscope,
                     fmt::format("'{}' has no trainscope schema yet (version 0)", path.string()));
  version = info.version;
  return db;
}

}  // namespace ts::store::detail
