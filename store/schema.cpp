// Schema definition, migrations and file identification (docs/schema.md).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <fstream>
#include <system_error>
#include <vector>

#include "store/open.h"
#include "store/open_files.h"
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

// v3: streaming and liveness (issue 14). A run is written while it runs; its row says which
// process writes it and when it last wrote, so readers tell a live run from a dead one.
constexpr std::string_view kV2ToV3 = R"sql(
ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN pid_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN heartbeat_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN heartbeat_interval_ms INTEGER NOT NULL DEFAULT 0;
)sql";

// v4: distribution. One run is one row with N ranks; the per-rank tables say whose a row is
// (0 for every row before), their indexes lead with (run_id, rank) because readers ask for one
// rank at a time; communication gets its tables.
constexpr std::string_view kV3ToV4 = R"sql(
ALTER TABLE runs ADD COLUMN ranks INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN global_batch_size INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET global_batch_size = batch_size;
ALTER TABLE iterations ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
ALTER TABLE phases ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
ALTER TABLE metrics ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory_timeline ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory_peak ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
DROP INDEX iterations_run;
CREATE INDEX iterations_run_rank ON iterations(run_id, rank, idx);
DROP INDEX phases_run;
CREATE INDEX phases_run_rank ON phases(run_id, rank, iteration, start_ns);
DROP INDEX events_run_start;
CREATE INDEX events_run_rank_start ON events(run_id, rank, start_ns);
DROP INDEX samples_run;
CREATE INDEX samples_run_rank ON samples(run_id, rank, t_ns);
DROP INDEX memory_timeline_run;
CREATE INDEX memory_timeline_run_rank ON memory_timeline(run_id, rank, t_ns);
CREATE TABLE collectives (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank       INTEGER NOT NULL,
  iteration  INTEGER NOT NULL,
  thread     INTEGER NOT NULL,
  collective TEXT    NOT NULL,
  label      TEXT    NOT NULL,
  bytes      INTEGER NOT NULL,
  start_ns   INTEGER NOT NULL,
  end_ns     INTEGER NOT NULL
);
CREATE INDEX collectives_run_rank_start ON collectives(run_id, rank, start_ns);
CREATE TABLE comm_ops (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank       INTEGER NOT NULL,
  backend    TEXT    NOT NULL,
  collective TEXT    NOT NULL,
  bytes      INTEGER NOT NULL,
  ranks      INTEGER NOT NULL,
  count      INTEGER NOT NULL,
  total_ns   INTEGER NOT NULL,
  mean_ns    REAL    NOT NULL,
  min_ns     INTEGER NOT NULL,
  max_ns     INTEGER NOT NULL,
  algbw_gbps REAL    NOT NULL,
  busbw_gbps REAL    NOT NULL
);
CREATE INDEX comm_ops_run ON comm_ops(run_id, rank, collective, bytes);
CREATE TABLE rank_breakdown (
  id               INTEGER PRIMARY KEY,
  run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank             INTEGER NOT NULL,
  iteration        INTEGER NOT NULL,
  start_ns         INTEGER NOT NULL,
  end_ns           INTEGER NOT NULL,
  compute_ns       INTEGER NOT NULL,
  comm_ns          INTEGER NOT NULL,
  overlap_ns       INTEGER NOT NULL,
  exposed_comm_ns  INTEGER NOT NULL,
  idle_ns          INTEGER NOT NULL,
  backward_wait_ns INTEGER NOT NULL
);
CREATE INDEX rank_breakdown_run ON rank_breakdown(run_id, rank, iteration);
CREATE TABLE collective_bench (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  backend     TEXT    NOT NULL,
  collective  TEXT    NOT NULL,
  bytes       INTEGER NOT NULL,
  ranks       INTEGER NOT NULL,
  iterations  INTEGER NOT NULL,
  time_ns     REAL    NOT NULL,
  algbw_gbps  REAL    NOT NULL,
  busbw_gbps  REAL    NOT NULL,
  min_time_ns INTEGER NOT NULL,
  max_time_ns INTEGER NOT NULL
);
CREATE INDEX collective_bench_run ON collective_bench(run_id);
)sql";

// v5: the viewer (issue 17). The timeline's level of detail, written at a run's final write
// (store/timeline_index.h): per lane (a rank's thread, a GPU stream), depth and level, buckets
// summarising the events shorter than a bucket, and the longer events listed by size class so a
// window finds them without scanning from the run's start. And the memory ledger's changes with
// their owner, so the live bytes at any time can be split by category and layer. And an op's
// inclusive total beside its self time.
constexpr std::string_view kV4ToV5 = R"sql(
CREATE TABLE timeline_index (
  run_id    INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  origin_ns INTEGER NOT NULL,
  end_ns    INTEGER NOT NULL,
  base_ns   INTEGER NOT NULL,
  levels    INTEGER NOT NULL,
  events    INTEGER NOT NULL
);
CREATE TABLE timeline_lanes (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  lane    INTEGER NOT NULL,
  source  TEXT    NOT NULL CHECK (source IN ('cpu', 'gpu')),
  rank    INTEGER NOT NULL,
  thread  INTEGER NOT NULL,
  label   TEXT    NOT NULL,
  depths  INTEGER NOT NULL,
  events  INTEGER NOT NULL,
  PRIMARY KEY (run_id, lane)
) WITHOUT ROWID;
CREATE TABLE timeline_tiles (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  level   INTEGER NOT NULL,
  bucket  INTEGER NOT NULL,
  lane    INTEGER NOT NULL,
  depth   INTEGER NOT NULL,
  events  INTEGER NOT NULL,
  busy_ns INTEGER NOT NULL,
  name_id INTEGER NOT NULL,
  PRIMARY KEY (run_id, level, bucket, lane, depth)
) WITHOUT ROWID;
CREATE TABLE timeline_spans (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  size_class INTEGER NOT NULL,
  lane       INTEGER NOT NULL,
  depth      INTEGER NOT NULL,
  start_ns   INTEGER NOT NULL,
  end_ns     INTEGER NOT NULL,
  source_id  INTEGER NOT NULL,
  name_id    INTEGER NOT NULL
);
CREATE INDEX timeline_spans_run_class ON timeline_spans(run_id, size_class, start_ns);
CREATE TABLE memory_changes (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank        INTEGER NOT NULL,
  t_ns        INTEGER NOT NULL,
  category_id INTEGER NOT NULL,
  owner_id    INTEGER NOT NULL,
  delta       INTEGER NOT NULL
);
CREATE INDEX memory_changes_run_rank_t ON memory_changes(run_id, rank, t_ns);
ALTER TABLE kernel_summary ADD COLUMN inclusive_ns INTEGER NOT NULL DEFAULT 0;
)sql";

// v6: parameter servers (distributed/ps). A worker's waits for its pulls and pushes beside the other
// parts of its breakdown (0 for every row before and for all-reduce runs); how stale the
// gradients the servers applied were, a histogram per worker (rank) and iteration, read one
// run's kind at a time; and each server shard's totals over the run (rank: the rank hosting it).
constexpr std::string_view kV5ToV6 = R"sql(
ALTER TABLE rank_breakdown ADD COLUMN pull_wait_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rank_breakdown ADD COLUMN push_wait_ns INTEGER NOT NULL DEFAULT 0;
CREATE TABLE ps_staleness (
  id        INTEGER PRIMARY KEY,
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank      INTEGER NOT NULL,
  iteration INTEGER NOT NULL,
  kind      TEXT    NOT NULL,
  staleness INTEGER NOT NULL,
  count     INTEGER NOT NULL
);
CREATE INDEX ps_staleness_run_kind ON ps_staleness(run_id, kind, rank, iteration, staleness);
CREATE TABLE ps_servers (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  server     INTEGER NOT NULL,
  rank       INTEGER NOT NULL,
  keys       INTEGER NOT NULL,
  bytes_held INTEGER NOT NULL,
  bytes_in   INTEGER NOT NULL,
  bytes_out  INTEGER NOT NULL,
  pushes     INTEGER NOT NULL,
  pulls      INTEGER NOT NULL,
  updates    INTEGER NOT NULL,
  busy_ns    INTEGER NOT NULL,
  queue_max  INTEGER NOT NULL,
  queue_mean REAL    NOT NULL
);
CREATE INDEX ps_servers_run ON ps_servers(run_id, server);
)sql";

// v7: rankings by what a typical iteration spends (issue 38): each op's and layer's median time
// per timed iteration beside the totals. -1: not recorded (rows written before, GPU kernels).
constexpr std::string_view kV6ToV7 = R"sql(
ALTER TABLE kernel_summary ADD COLUMN median_per_iteration_ns REAL NOT NULL DEFAULT -1;
ALTER TABLE layers ADD COLUMN median_per_iteration_ns REAL NOT NULL DEFAULT -1;
)sql";

// v8: culprits tested, not only measured (issue 38): each op's self time and each layer's time in
// every timed iteration (store::encode_series), the samples compare tests a change on. '': none.
constexpr std::string_view kV7ToV8 = R"sql(
ALTER TABLE kernel_summary ADD COLUMN per_iteration_ns TEXT NOT NULL DEFAULT '';
ALTER TABLE layers ADD COLUMN per_iteration_ns TEXT NOT NULL DEFAULT '';
)sql";

// v9: a run's identity and progress (issue 39): a uuid that every copy and spill of the run keeps
// (import matches runs on it), and when its writer last saw it advance (progress_ms, Unix ms on
// the writer's clock, as heartbeat_ms) with how long it may go without (stall_after_ms): a run
// whose heartbeat goes on past that reads as stalled. '' and 0: not recorded (runs before v9).
constexpr std::string_view kV8ToV9 = R"sql(
ALTER TABLE runs ADD COLUMN uuid TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN progress_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN stall_after_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_uuid ON runs(uuid);
)sql";

// v10: the GPU breakdown of every rank (issue 40): each rank traces its GPU and sends rank 0 its
// per-iteration breakdown, so gpu_breakdown says whose a row is (0 for every row before, which
// only rank 0 wrote); its index leads with (run_id, rank) as the other per-rank tables' do.
constexpr std::string_view kV9ToV10 = R"sql(
ALTER TABLE gpu_breakdown ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
DROP INDEX gpu_breakdown_run;
CREATE INDEX gpu_breakdown_run_rank ON gpu_breakdown(run_id, rank, device, iteration);
)sql";

// v11: each rank's clock against rank 0's, measured at the start and end of a multi-rank run
// (issue 41), so that readers set the ranks' times on rank 0's clock (vocabulary/clock_alignment.h).
constexpr std::string_view kV10ToV11 = R"sql(
CREATE TABLE rank_clocks (
  id                INTEGER PRIMARY KEY,
  run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank              INTEGER NOT NULL,
  phase             TEXT NOT NULL,
  offset_ns         INTEGER NOT NULL,
  uncertainty_ns    INTEGER NOT NULL,
  at_ns             INTEGER NOT NULL,
  min_round_trip_ns INTEGER NOT NULL,
  pings             INTEGER NOT NULL
);
CREATE INDEX rank_clocks_run ON rank_clocks(run_id, rank, phase);
)sql";

// v12: the collectives benchmark keeps every timed call (issue 41): each row's bus factor, its
// median and 99th percentile over the calls of every rank and how many there were, and the calls
// themselves per row and rank (store::encode_series). Rows before keep the factor their busbw and
// algbw imply (0 where algbw is 0: the barrier), -1 percentiles and 0 samples: not recorded.
constexpr std::string_view kV11ToV12 = R"sql(
ALTER TABLE collective_bench ADD COLUMN bus_factor REAL NOT NULL DEFAULT 0;
ALTER TABLE collective_bench ADD COLUMN p50_ns REAL NOT NULL DEFAULT -1;
ALTER TABLE collective_bench ADD COLUMN p99_ns REAL NOT NULL DEFAULT -1;
ALTER TABLE collective_bench ADD COLUMN samples INTEGER NOT NULL DEFAULT 0;
UPDATE collective_bench SET bus_factor = busbw_gbps / algbw_gbps WHERE algbw_gbps > 0;
CREATE TABLE collective_bench_samples (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  collective  TEXT    NOT NULL,
  bytes       INTEGER NOT NULL,
  rank        INTEGER NOT NULL,
  time_ns     TEXT    NOT NULL
);
CREATE INDEX collective_bench_samples_run ON collective_bench_samples(run_id, collective, bytes, rank);
)sql";

// v13: every collective call of a multi-rank run split per rank into waiting for the last rank
// and moving data (issue 41, item 2), on rank 0's clock; written when the run has been stored
// (reports/collective_split.h). Runs without rows (before v13, or whose split was not written)
// are split on reading, from their collectives and clocks.
constexpr std::string_view kV12ToV13 = R"sql(
CREATE TABLE collective_waits (
  id              INTEGER PRIMARY KEY,
  run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank            INTEGER NOT NULL,
  iteration       INTEGER NOT NULL,
  collective      TEXT    NOT NULL,
  label           TEXT    NOT NULL,
  call            INTEGER NOT NULL,
  bytes           INTEGER NOT NULL,
  arrival_ns      INTEGER NOT NULL,
  last_arrival_ns INTEGER NOT NULL,
  last_rank       INTEGER NOT NULL,
  waiting_ns      INTEGER NOT NULL,
  moving_ns       INTEGER NOT NULL,
  uncertainty_ns  INTEGER NOT NULL
);
CREATE INDEX collective_waits_run ON collective_waits(run_id, iteration, rank);
)sql";

// v14: what trained a run (issue 42): trainscope's engine, or the framework whose trace was
// imported (`trainscope import-trace`); every run before is trainscope's.
constexpr std::string_view kV13ToV14 = R"sql(
ALTER TABLE runs ADD COLUMN framework TEXT NOT NULL DEFAULT 'trainscope';
)sql";

// v15: projections onto several ranks (issue 44). The parameters whose gradients a run's
// backward produces, per gradient group in registration order, with their sizes: what a
// projection packs into buckets. And each projected distributed iteration (a run row of its own,
// framework 'projection') linked to what it was projected from: the one-rank run, the collectives
// sweep its link model was fitted to, and the multi-rank run it is checked against, with the error
// (the ledger). Those three ids have no foreign key: deleting an input keeps the ledger's row.
constexpr std::string_view kV14ToV15 = R"sql(
CREATE TABLE gradients (
  id     INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank   INTEGER NOT NULL DEFAULT 0,
  grp    INTEGER NOT NULL,
  slot   INTEGER NOT NULL,
  name   TEXT    NOT NULL,
  bytes  INTEGER NOT NULL
);
CREATE INDEX gradients_run_rank ON gradients(run_id, rank, grp, slot);
CREATE TABLE projections (
  id              INTEGER PRIMARY KEY,
  run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  source_run_id   INTEGER NOT NULL,
  sweep_run_id    INTEGER NOT NULL DEFAULT 0,
  measured_run_id INTEGER NOT NULL DEFAULT 0,
  strategy        TEXT    NOT NULL,
  ranks           INTEGER NOT NULL,
  link            TEXT    NOT NULL,
  latency_ns      REAL    NOT NULL,
  bandwidth_gbps  REAL    NOT NULL,
  knobs_json      TEXT    NOT NULL,
  model_json      TEXT    NOT NULL,
  projected_ns    REAL    NOT NULL,
  measured_ns     REAL    NOT NULL DEFAULT -1,
  error           REAL,
  created_at      TEXT    NOT NULL
);
CREATE INDEX projections_run ON projections(run_id);
CREATE INDEX projections_measured ON projections(measured_run_id);
ALTER TABLE collective_bench ADD COLUMN beside_rate REAL NOT NULL DEFAULT -1;
ALTER TABLE collective_bench ADD COLUMN beside_ns REAL NOT NULL DEFAULT -1;
)sql";

constexpr std::array<std::string_view, kSchemaVersion> kMigrations = {
    kV0ToV1, kV1ToV2,  kV2ToV3,   kV3ToV4,   kV4ToV5,   kV5ToV6,   kV6ToV7,  kV7ToV8,
    kV8ToV9, kV9ToV10, kV10ToV11, kV11ToV12, kV12ToV13, kV13ToV14, kV14ToV15};

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

// SQLite's files beside a database: its path (symbolic links resolved, as SQLite does) + suffix.
fs::path sidecar(const fs::path& db, std::string_view suffix) {
  std::error_code ec;
  fs::path base = fs::canonical(db, ec);
  if (ec) base = fs::absolute(db, ec);
  return base.string() + std::string(suffix);
}

// A -wal with content holds committed transactions not yet copied into the database file (a
// crash, a checkpoint cut short by a full disk): the file alone is then old, or torn.
bool has_wal_content(const fs::path& db) {
  std::error_code ec;
  const auto size = fs::file_size(sidecar(db, "-wal"), ec);
  return !ec && size > 0;
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
  if (size == 0) return {0, !has_wal_content(path)};  // a new db's pages may all sit in its -wal
  // Open through SQLite here already (so checked then): reading it with a descriptor of our
  // own and closing that would drop our connections' locks (store/open_files.h).
  if (opened_by_sqlite_here(path)) return {0, false};
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

// The one place a URI is built (for immutable=1): every byte but '/' and RFC 3986's unreserved
// ASCII characters is percent-encoded, so '?', '#', '%' and non-ASCII bytes in a name stay part of
// the path; "file://" + an absolute path leaves no room for an authority.
std::string file_uri(const fs::path& path, std::string_view query) {
  std::string uri = "file://";
  for (unsigned char c : fs::absolute(path).string()) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '_' || c == '.' || c == '~';
    if (unreserved || c == '/') uri += static_cast<char>(c);
    else uri += fmt::format("%{:02X}", c);
  }
  uri += '?';
  uri += query;
  return uri;
}

// Whether a read-only connection failed because SQLite could not create the -shm file that WAL
// mode needs (read-only media, a directory this user cannot write).
bool shm_unavailable(int rc) { return (rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_READONLY; }

// What open_for_write made for a new database: missing parent directories and the empty file.
// Unless keep() is called they are removed again, so a create that fails before the schema is in
// (a name too long for the -wal beside it, a full disk) leaves nothing behind. The file is made
// with O_EXCL, so one that another process created is never ours to remove, and it is removed
// only while it still holds no schema.
class NewFileUndo {
 public:
  NewFileUndo() = default;
  NewFileUndo(const NewFileUndo&) = delete;
  NewFileUndo& operator=(const NewFileUndo&) = delete;
  ~NewFileUndo() {
    if (!kept_) undo();
  }

  // Creates the parents and the empty file; false when the file exists (someone else's).
  bool create(const fs::path& path) {
    std::error_code ec;
    std::vector<fs::path> missing;  // innermost first
    for (fs::path dir = path.parent_path(); !dir.empty() && !fs::exists(dir, ec); dir = dir.parent_path()) {
      missing.push_back(dir);
      if (dir == dir.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      if (fs::create_directory(*it, ec)) {
        dirs_.push_back(*it);
      } else if (ec) {
        throw StoreError(StoreError::Kind::io,
                         fmt::format("cannot create directory '{}': {}", it->string(), ec.message()));
      }
    }
    for (const std::string_view suffix : {"-wal", "-shm", "-journal"}) {
      if (!fs::exists(sidecar(path, suffix), ec)) sidecars_.push_back(sidecar(path, suffix));
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);  // SQLite's own mode
    if (fd < 0) {
      if (errno == EEXIST) return false;
      throw StoreError(StoreError::Kind::io,
                       fmt::format("cannot create '{}': {}", path.string(), std::generic_category().message(errno)));
    }
    ::close(fd);
    file_ = path;
    return true;
  }
  void keep() { kept_ = true; }

 private:
  void undo() noexcept {
    std::error_code ec;
    if (!file_.empty()) {
      bool schemaless = false;
      try {
        schemaless = inspect(file_, /*immutable=*/true).empty;
      } catch (...) {  // unreadable: leave it as it is
      }
      if (!schemaless) return;
      fs::remove(file_, ec);
      for (const auto& s : sidecars_) fs::remove(s, ec);
    }
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) fs::remove(*it, ec);  // only while empty
  }

  std::vector<fs::path> dirs_;      // created here, outermost first
  fs::path file_;                   // created here (empty until create() succeeds)
  std::vector<fs::path> sidecars_;  // -wal / -shm / -journal that did not exist before
  bool kept_ = false;
};

}  // namespace

std::string_view migration_sql(int from_version) { return kMigrations.at(static_cast<size_t>(from_version)); }

FileInfo inspect(const fs::path& path, bool immutable) {
  if (precheck(path).empty) return {0, true};
  // immutable=1 makes no -shm / -wal beside a file that may not be ours, but it also skips the
  // -wal: when that holds committed pages the -wal is read through a plain read-only connection.
  Db db = immutable && !has_wal_content(path)
              ? Db::from_uri(file_uri(path, "mode=ro&immutable=1"), SQLITE_OPEN_READONLY)
              : Db(path, SQLITE_OPEN_READONLY);
  return identify(db, path);
}

Db open_for_write(const fs::path& path, std::chrono::milliseconds lock_wait) {
  std::error_code ec;
  NewFileUndo created;  // declared before `db`: removes what it made after the connection is closed
  if (fs::exists(path, ec) || !created.create(path)) {
    inspect(path, false);  // throws for foreign / newer files before anything is written
  }
  Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db.set_lock_wait(lock_wait, true);
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
  created.keep();
  return db;
}

Db open_for_read(const fs::path& path, int& version) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw StoreError(StoreError::Kind::not_found, fmt::format("no database at '{}'", path.string()));
  if (precheck(path).empty)
    throw StoreError(StoreError::Kind::not_trainscope,
                     fmt::format("'{}' is empty: no trainscope schema yet (version 0)", path.string()));
  Db db(path, SQLITE_OPEN_READONLY);
  // The first read sets WAL up, creating -shm beside the file. On read-only media or in a
  // directory this user cannot write that fails; with no -wal to replay nothing can change the
  // file there, so it is read as immutable. A -wal with content cannot be read without -shm.
  if (const int rc = sqlite3_exec(db.get(), "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
      rc != SQLITE_OK) {
    if (!shm_unavailable(rc)) TS_SQLITE_CHECK(rc, db.get(), fmt::format("reading '{}'", path.string()));
    if (has_wal_content(path)) {
      const std::string base = sidecar(path, "").string();
      throw StoreError(StoreError::Kind::io,
                       fmt::format("'{0}' cannot be read here: its '{1}-wal' holds data not yet in the database file, "
                                   "and reading that needs '{1}-shm', which cannot be created (read-only media or a "
                                   "directory you cannot write). Copy '{1}', '{1}-wal' and '{1}-shm' (when present) "
                                   "together to a writable directory and read the copy, or make the directory "
                                   "writable",
                                   path.string(), base));
    }
    db = Db::from_uri(file_uri(path, "mode=ro&immutable=1"), SQLITE_OPEN_READONLY);
  }
  const FileInfo info = identify(db, path);
  if (info.empty)
    throw StoreError(StoreError::Kind::not_trainscope,
                     fmt::format("'{}' has no trainscope schema yet (version 0)", path.string()));
  version = info.version;
  return db;
}

}  // namespace ts::store::detail
