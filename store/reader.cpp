#include "store/reader.h"

#include <fmt/format.h>
#include <functional>

#include <bit>
#include <set>
#include <string>

#include "store/liveness.h"
#include "store/open.h"

namespace ts::store {
namespace fs = std::filesystem;
using detail::Stmt;

struct Reader::Impl {
  explicit Impl(const fs::path& path) : db(detail::open_for_read(path, version)), written_ms(last_written_ms(path)) {}
  int version = 0;
  detail::Db db;
  int64_t written_ms = 0;  // the file's (or its WAL's) last write, when opened

  // Runs `sql` with ?1 = run (and further parameters bound by `bind`), mapping each row with `row`.
  template <class T, class Row, class Bind>
  std::vector<T> query(std::string_view sql, int64_t run, Row row, Bind bind) {
    Stmt s(db, sql);
    Stmt::Use use(s);
    s.bind(1, run);
    bind(s);
    std::vector<T> out;
    while (s.step()) out.push_back(row(s));
    return out;
  }
  template <class T, class Row>
  std::vector<T> query(std::string_view sql, int64_t run, Row row) {
    return query<T>(sql, run, row, [](Stmt&) {});
  }
  int64_t count(std::string_view sql, int64_t run, const std::function<void(Stmt&)>& bind) {
    return query<int64_t>(
               sql, run, [](const Stmt& s) { return s.col_int(0); }, bind)
        .front();
  }

  // The distinct ranks of run `run` in `table` (indexed on (run_id, rank, ...)), in order: one
  // index seek per rank rather than a scan of the run's rows. Files before v4 hold rank 0 only.
  std::vector<int64_t> distinct_ranks(std::string_view table, int64_t run) {
    if (version < 4) {
      const std::string sql = fmt::format("SELECT EXISTS (SELECT 1 FROM {} WHERE run_id = ?1)", table);
      return count(sql, run, [](Stmt&) {}) != 0 ? std::vector<int64_t>{0} : std::vector<int64_t>{};
    }
    const std::string sql = fmt::format(
        "WITH RECURSIVE r(rank) AS (SELECT (SELECT min(rank) FROM {0} WHERE run_id = ?1) UNION ALL "
        "SELECT (SELECT min(rank) FROM {0} WHERE run_id = ?1 AND rank > r.rank) FROM r WHERE r.rank IS NOT NULL) "
        "SELECT rank FROM r WHERE rank IS NOT NULL",
        table);
    return query<int64_t>(sql, run, [](const Stmt& s) { return s.col_int(0); });
  }
};

namespace {
// How a per-rank query picks its rows (schema v4): `column` is the rank to select, `filter` goes
// at the end of WHERE, `order` at the start of ORDER BY (all ranks: by rank first). Files before
// the table had its rank column (`since`: v4, gpu_breakdown v10) hold rank 0's rows only, so
// asking them for another rank finds nothing (`none`).
struct RankSql {
  std::string column, filter, order;
  bool none = false;
  std::optional<int64_t> bound;  // the rank bound as parameter `param`
  int param = 0;
  void bind(Stmt& s) const {
    if (bound) s.bind(param, *bound);
  }
};

RankSql rank_sql(int version, std::optional<int64_t> rank, std::string_view table_alias, int param, int since = 4) {
  RankSql r;
  if (version < since) {
    r.column = "0";
    r.none = rank.has_value() && *rank != 0;
    return r;
  }
  const std::string col = table_alias.empty() ? "rank" : fmt::format("{}.rank", table_alias);
  r.column = col;
  if (rank) {
    r.filter = fmt::format(" AND {} = ?{}", col, param);
    r.bound = rank;
    r.param = param;
  } else {
    r.order = col + ", ";
  }
  return r;
}

// Files before v3 have no liveness columns: they read as never heard from.
std::string run_columns(int version) {
  return std::string("SELECT id, workload, preset, device, batch_size, iterations, warmup, threads, seed, trace, "
                     "parameter_count, started_at, command_line, config_json, status, ended_at, error, ") +
         (version >= 3 ? "host, boot_id, pid, pid_start, heartbeat_interval_ms, heartbeat_ms" : "'', '', 0, 0, 0, 0") +
         (version >= 4 ? ", ranks, global_batch_size" : ", 1, batch_size") +
         (version >= 9 ? ", uuid, progress_ms, stall_after_ms" : ", '', 0, 0") +
         (version >= 14 ? ", framework" : ", 'trainscope'") + " FROM runs";
}

RunRow run_row(const Stmt& s) {
  RunRow r;
  r.id = s.col_int(0);
  r.workload = s.col_text(1);
  r.preset = s.col_text(2);
  r.device = s.col_text(3);
  r.batch_size = s.col_int(4);
  r.iterations = s.col_int(5);
  r.warmup = s.col_int(6);
  r.threads = s.col_int(7);
  r.seed = std::bit_cast<uint64_t>(s.col_int(8));
  r.trace = s.col_int(9) != 0;
  r.parameter_count = s.col_int(10);
  r.started_at = s.col_text(11);
  r.command_line = s.col_text(12);
  r.config_json = s.col_text(13);
  const std::string status = s.col_text(14);
  if (auto parsed = parse_run_status(status)) {
    r.status = *parsed;
  } else {
    throw StoreError(StoreError::Kind::corrupt, "run " + std::to_string(r.id) + " has unknown status '" + status + "'");
  }
  r.ended_at = s.col_text(15);
  r.error = s.col_text(16);
  r.host = s.col_text(17);
  r.boot_id = s.col_text(18);
  r.pid = s.col_int(19);
  r.pid_start = s.col_int(20);
  r.heartbeat_interval_ms = s.col_int(21);
  r.heartbeat_ms = s.col_int(22);
  r.ranks = s.col_int(23);
  r.global_batch_size = s.col_int(24);
  r.uuid = s.col_text(25);
  r.progress_ms = s.col_int(26);
  r.stall_after_ms = s.col_int(27);
  r.framework = s.col_text(28);
  return r;
}

constexpr std::string_view kProjectionColumns =
    "SELECT id, run_id, source_run_id, sweep_run_id, measured_run_id, strategy, ranks, link, latency_ns, "
    "bandwidth_gbps, knobs_json, model_json, projected_ns, measured_ns, error, created_at FROM projections";

ProjectionRow projection_row(const Stmt& s) {
  ProjectionRow r;
  r.id = s.col_int(0);
  r.run_id = s.col_int(1);
  r.source_run_id = s.col_int(2);
  r.sweep_run_id = s.col_int(3);
  r.measured_run_id = s.col_int(4);
  r.strategy = s.col_text(5);
  r.ranks = s.col_int(6);
  r.link = s.col_text(7);
  r.latency_ns = s.col_double(8);
  r.bandwidth_gbps = s.col_double(9);
  r.knobs_json = s.col_text(10);
  r.model_json = s.col_text(11);
  r.projected_ns = s.col_double(12);
  r.measured_ns = s.col_double(13);
  if (!s.col_null(14)) r.error = s.col_double(14);
  r.created_at = s.col_text(15);
  return r;
}
}  // namespace

Reader::Reader(const fs::path& path) : impl_(std::make_unique<Impl>(path)) {}
Reader::~Reader() = default;
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;

int Reader::schema_version() const { return impl_->version; }

std::vector<RunRow> Reader::runs() {
  Stmt s(impl_->db, run_columns(impl_->version) + " ORDER BY id");
  Stmt::Use use(s);
  std::vector<RunRow> out;
  while (s.step()) out.push_back(run_row(s));
  for (auto& r : out) r.db_written_ms = impl_->written_ms;
  return out;
}

std::optional<RunRow> Reader::run(int64_t id) {
  auto rows = impl_->query<RunRow>(run_columns(impl_->version) + " WHERE id = ?1", id, run_row);
  if (rows.empty()) return std::nullopt;
  rows.front().db_written_ms = impl_->written_ms;
  return std::move(rows.front());
}

std::vector<EnvEntry> Reader::environment(int64_t run) {
  return impl_->query<EnvEntry>("SELECT key, value FROM environment WHERE run_id = ?1 ORDER BY id", run,
                                [](const Stmt& s) {
                                  return EnvEntry{s.col_text(0), s.col_text(1)};
                                });
}

std::vector<IterationRow> Reader::iterations(int64_t run, std::optional<int64_t> rank) {
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  if (r.none) return {};
  return impl_->query<IterationRow>(
      fmt::format("SELECT idx, warmup, start_ns, end_ns, samples, loss, {} FROM iterations WHERE run_id = ?1{} "
                  "ORDER BY {}idx, id",
                  r.column, r.filter, r.order),
      run,
      [](const Stmt& s) {
        return IterationRow{s.col_int(0), s.col_int(1) != 0, s.col_int(2), s.col_int(3),
                            s.col_int(4), s.col_double(5),   s.col_int(6)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<PhaseRow> Reader::phases(int64_t run, std::optional<int64_t> rank) {
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  if (r.none) return {};
  return impl_->query<PhaseRow>(
      fmt::format("SELECT iteration, phase, start_ns, end_ns, {} FROM phases WHERE run_id = ?1{} "
                  "ORDER BY {}iteration, start_ns, id",
                  r.column, r.filter, r.order),
      run,
      [](const Stmt& s) {
        return PhaseRow{s.col_int(0), s.col_text(1), s.col_int(2), s.col_int(3), s.col_int(4)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<EventRow> Reader::events(int64_t run, int64_t from_ns, int64_t to_ns, int64_t limit,
                                     std::optional<int64_t> rank) {
  if (!rank && impl_->version >= 4) {
    // All ranks: rank by rank, each through the (run_id, rank, start_ns) index, so a time window
    // costs a seek per rank rather than a scan of the run.
    std::vector<EventRow> out;
    for (const int64_t k : impl_->distinct_ranks("events", run)) {
      const int64_t left = limit < 0 ? -1 : limit - static_cast<int64_t>(out.size());
      if (left == 0) break;
      auto part = events(run, from_ns, to_ns, left, k);
      out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
    }
    return out;
  }
  const RankSql r = rank_sql(impl_->version, rank, "e", 5);
  if (r.none) return {};
  return impl_->query<EventRow>(
      fmt::format("SELECT e.start_ns, e.end_ns, n.value, l.value, k.value, p.value, e.iteration, e.thread, {} "
                  "FROM events e "
                  "JOIN strings n ON n.id = e.name_id JOIN strings l ON l.id = e.layer_id "
                  "JOIN strings k ON k.id = e.kind_id JOIN strings p ON p.id = e.pass_id "
                  "WHERE e.run_id = ?1{} AND e.start_ns BETWEEN ?2 AND ?3 "
                  "ORDER BY e.start_ns, e.end_ns DESC, e.id LIMIT ?4",
                  r.column, r.filter),
      run,
      [](const Stmt& s) {
        return EventRow{s.col_int(0),  s.col_int(1), s.col_text(2), s.col_text(3), s.col_text(4),
                        s.col_text(5), s.col_int(6), s.col_int(7),  s.col_int(8)};
      },
      [&](Stmt& s) {
        s.bind(2, from_ns).bind(3, to_ns).bind(4, limit < 0 ? int64_t{-1} : limit);
        r.bind(s);
      });
}

std::vector<EventIdRow> Reader::event_ids(int64_t run, int64_t rank, const std::vector<std::string>& kinds) {
  std::vector<int64_t> kind_ids;
  for (const auto& k : kinds) {
    if (const auto id = string_id(k)) kind_ids.push_back(*id);
  }
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  if (r.none || kind_ids.empty()) return {};
  // The kinds' ids inline (whole numbers read from the db): a handful, known before the query.
  std::string in;
  for (const int64_t id : kind_ids) in += fmt::format("{}{}", in.empty() ? "" : ", ", id);
  return impl_->query<EventIdRow>(
      fmt::format("SELECT start_ns, end_ns, name_id, layer_id, kind_id, pass_id, iteration, thread FROM events "
                  "WHERE run_id = ?1{} AND kind_id IN ({}) ORDER BY start_ns, id",
                  r.filter, in),
      run,
      [](const Stmt& s) {
        return EventIdRow{s.col_int(0), s.col_int(1), s.col_int(2), s.col_int(3),
                          s.col_int(4), s.col_int(5), s.col_int(6), s.col_int(7)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::optional<int64_t> Reader::string_id(std::string_view value) {
  Stmt s(impl_->db, "SELECT id FROM strings WHERE value = ?1");
  Stmt::Use use(s);
  s.bind(1, value);
  if (!s.step()) return std::nullopt;
  return s.col_int(0);
}

std::map<int64_t, std::string> Reader::strings(const std::vector<int64_t>& ids) {
  std::map<int64_t, std::string> out;
  Stmt s(impl_->db, "SELECT value FROM strings WHERE id = ?1");
  for (const int64_t id : ids) {
    if (out.contains(id)) continue;
    Stmt::Use use(s);
    s.bind(1, id);
    if (s.step()) out.emplace(id, s.col_text(0));
  }
  return out;
}

int64_t Reader::iteration_count(int64_t run, std::optional<int64_t> rank) {
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  if (r.none) return 0;
  return impl_->count(fmt::format("SELECT count(*) FROM iterations WHERE run_id = ?1{}", r.filter), run,
                      [&](Stmt& s) { r.bind(s); });
}

int64_t Reader::event_count(int64_t run, std::optional<int64_t> rank) {
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  if (r.none) return 0;
  return impl_->count(fmt::format("SELECT count(*) FROM events WHERE run_id = ?1{}", r.filter), run,
                      [&](Stmt& s) { r.bind(s); });
}

std::vector<std::pair<int64_t, int64_t>> Reader::event_counts_by_rank(int64_t run) {
  if (impl_->version < 4) {
    const int64_t n = event_count(run, std::nullopt);
    if (n == 0) return {};
    return {{0, n}};
  }
  return impl_->query<std::pair<int64_t, int64_t>>(
      "SELECT rank, count(*) FROM events WHERE run_id = ?1 GROUP BY rank ORDER BY rank", run, [](const Stmt& s) {
        return std::pair<int64_t, int64_t>{s.col_int(0), s.col_int(1)};
      });
}

std::vector<int64_t> Reader::ranks_present(int64_t run) {
  std::set<int64_t> ranks;
  for (const int64_t k : impl_->distinct_ranks("iterations", run)) ranks.insert(k);
  for (const int64_t k : impl_->distinct_ranks("events", run)) ranks.insert(k);
  return {ranks.begin(), ranks.end()};
}

std::vector<LayerRow> Reader::layers(int64_t run) {
  const std::string sql = fmt::format(
      "SELECT layer, op_types, calls, forward_ns, backward_ns, activation_bytes, parameter_count, {}, {}, {} FROM "
      "layers WHERE run_id = ?1 ORDER BY id",
      impl_->version >= 2 ? "gpu_forward_ns, gpu_backward_ns" : "0.0, 0.0",
      impl_->version >= 7 ? "median_per_iteration_ns" : "-1.0", impl_->version >= 8 ? "per_iteration_ns" : "''");
  return impl_->query<LayerRow>(sql, run, [](const Stmt& s) {
    return LayerRow{s.col_text(0),
                    s.col_text(1),
                    s.col_int(2),
                    s.col_double(3),
                    s.col_double(4),
                    s.col_int(5),
                    s.col_int(6),
                    s.col_double(7),
                    s.col_double(8),
                    s.col_double(9),
                    decode_series(s.col_text(10))};
  });
}

std::vector<GpuActivityRow> Reader::gpu_activities(int64_t run, int64_t from_ns, int64_t to_ns, int64_t limit) {
  if (impl_->version < 2) return {};
  return impl_->query<GpuActivityRow>(
      "SELECT g.start_ns, g.end_ns, k.value, n.value, d.value, l.value, o.value, p.value, g.device, g.stream, "
      "g.correlation, g.iteration, g.bytes FROM gpu_activities g "
      "JOIN strings k ON k.id = g.kind_id JOIN strings n ON n.id = g.name_id JOIN strings d ON d.id = g.detail_id "
      "JOIN strings l ON l.id = g.layer_id JOIN strings o ON o.id = g.op_id JOIN strings p ON p.id = g.pass_id "
      "WHERE g.run_id = ?1 AND g.start_ns BETWEEN ?2 AND ?3 ORDER BY g.start_ns, g.id LIMIT ?4",
      run,
      [](const Stmt& s) {
        return GpuActivityRow{s.col_int(0),  s.col_int(1),  s.col_text(2), s.col_text(3), s.col_text(4),
                              s.col_text(5), s.col_text(6), s.col_text(7), s.col_int(8),  s.col_int(9),
                              s.col_int(10), s.col_int(11), s.col_int(12)};
      },
      [&](Stmt& s) { s.bind(2, from_ns).bind(3, to_ns).bind(4, limit < 0 ? int64_t{-1} : limit); });
}

int64_t Reader::gpu_activity_count(int64_t run) {
  if (impl_->version < 2) return 0;
  return impl_
      ->query<int64_t>("SELECT count(*) FROM gpu_activities WHERE run_id = ?1", run,
                       [](const Stmt& s) { return s.col_int(0); })
      .front();
}

std::vector<GpuBreakdownRow> Reader::gpu_breakdown(int64_t run, std::optional<int64_t> rank) {
  if (impl_->version < 2) return {};
  const RankSql r = rank_sql(impl_->version, rank, "", 2, 10);
  if (r.none) return {};
  return impl_->query<GpuBreakdownRow>(
      fmt::format("SELECT device, iteration, start_ns, end_ns, compute_ns, comm_ns, memcpy_ns, memset_ns, overlap_ns, "
                  "exposed_comm_ns, busy_ns, idle_ns, {} FROM gpu_breakdown WHERE run_id = ?1{} "
                  "ORDER BY {}device, iteration, id",
                  r.column, r.filter, r.order),
      run,
      [](const Stmt& s) {
        return GpuBreakdownRow{s.col_int(0),  s.col_int(1),  s.col_int(2), s.col_int(3), s.col_int(4),
                               s.col_int(5),  s.col_int(6),  s.col_int(7), s.col_int(8), s.col_int(9),
                               s.col_int(10), s.col_int(11), s.col_int(12)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<CopySummaryRow> Reader::copy_summary(int64_t run) {
  if (impl_->version < 2) return {};
  return impl_->query<CopySummaryRow>(
      "SELECT device, name, count, bytes, total_ns FROM copy_summary WHERE run_id = ?1 ORDER BY id", run,
      [](const Stmt& s) {
        return CopySummaryRow{s.col_text(0), s.col_text(1), s.col_int(2), s.col_int(3), s.col_int(4)};
      });
}

std::vector<OpSummaryRow> Reader::op_summary(int64_t run) {
  return impl_->query<OpSummaryRow>(
      fmt::format("SELECT device, name, count, total_ns, mean_ns, median_ns, min_ns, max_ns, {}, {}, {} FROM "
                  "kernel_summary WHERE run_id = ?1 ORDER BY id",
                  impl_->version >= 5 ? "inclusive_ns" : "0", impl_->version >= 7 ? "median_per_iteration_ns" : "-1.0",
                  impl_->version >= 8 ? "per_iteration_ns" : "''"),
      run, [](const Stmt& s) {
        return OpSummaryRow{s.col_text(0),
                            s.col_text(1),
                            s.col_int(2),
                            s.col_int(3),
                            s.col_double(4),
                            s.col_double(5),
                            s.col_int(6),
                            s.col_int(7),
                            s.col_int(8),
                            s.col_double(9),
                            decode_series(s.col_text(10))};
      });
}

std::vector<MemoryPoint> Reader::memory_timeline(int64_t run, std::optional<int64_t> rank) {
  const RankSql r = rank_sql(impl_->version, rank, "m", 2);
  if (r.none) return {};
  return impl_->query<MemoryPoint>(
      fmt::format(
          "SELECT m.t_ns, c.value, m.live_bytes, {} FROM memory_timeline m JOIN strings c ON c.id = m.category_id "
          "WHERE m.run_id = ?1{} ORDER BY {}m.t_ns, m.id",
          r.column, r.filter, r.order),
      run,
      [](const Stmt& s) {
        return MemoryPoint{s.col_int(0), s.col_text(1), s.col_int(2), s.col_int(3)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<MemoryPeakRow> Reader::memory_peak(int64_t run, std::optional<int64_t> rank) {
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  if (r.none) return {};
  return impl_->query<MemoryPeakRow>(
      fmt::format("SELECT category, bytes, t_ns, {} FROM memory_peak WHERE run_id = ?1{} ORDER BY {}id", r.column,
                  r.filter, r.order),
      run,
      [](const Stmt& s) {
        return MemoryPeakRow{s.col_text(0), s.col_int(1), s.col_int(2), s.col_int(3)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<MemoryChangeRow> Reader::memory_changes(int64_t run, std::optional<int64_t> rank) {
  if (impl_->version < 5) return {};
  const RankSql r = rank_sql(impl_->version, rank, "m", 2);
  return impl_->query<MemoryChangeRow>(
      fmt::format("SELECT m.t_ns, c.value, o.value, m.delta, m.rank FROM memory_changes m "
                  "JOIN strings c ON c.id = m.category_id JOIN strings o ON o.id = m.owner_id "
                  "WHERE m.run_id = ?1{} ORDER BY {}m.t_ns, m.id",
                  r.filter, r.order),
      run,
      [](const Stmt& s) {
        return MemoryChangeRow{s.col_int(0), s.col_text(1), s.col_text(2), s.col_int(3), s.col_int(4)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<MemoryLiveRow> Reader::memory_live_at(int64_t run, int64_t t_ns, int64_t rank) {
  if (impl_->version < 5) return {};
  // Summed by ids over the (run_id, rank, t_ns) index range, then named: the strings are joined
  // once per category and owner, not once per change.
  return impl_->query<MemoryLiveRow>(
      "SELECT c.value, o.value, s.bytes FROM (SELECT category_id, owner_id, sum(delta) AS bytes FROM memory_changes "
      "WHERE run_id = ?1 AND rank = ?2 AND t_ns <= ?3 GROUP BY category_id, owner_id) s "
      "JOIN strings c ON c.id = s.category_id JOIN strings o ON o.id = s.owner_id "
      "WHERE s.bytes <> 0 ORDER BY s.bytes DESC, c.value, o.value",
      run,
      [](const Stmt& s) {
        return MemoryLiveRow{s.col_text(0), s.col_text(1), s.col_int(2)};
      },
      [&](Stmt& s) { s.bind(2, rank).bind(3, t_ns); });
}

std::vector<MetricRow> Reader::metrics(int64_t run, std::optional<int64_t> rank) {
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  if (r.none) return {};
  return impl_->query<MetricRow>(
      fmt::format("SELECT name, value, unit, iteration, {} FROM metrics WHERE run_id = ?1{} ORDER BY {}id", r.column,
                  r.filter, r.order),
      run,
      [](const Stmt& s) {
        return MetricRow{s.col_text(0), s.col_double(1), s.col_text(2), s.col_int(3), s.col_int(4)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<SampleRow> Reader::samples(int64_t run, std::optional<int64_t> rank) {
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  if (r.none) return {};
  return impl_->query<SampleRow>(
      fmt::format("SELECT t_ns, name, value, {} FROM samples WHERE run_id = ?1{} ORDER BY {}t_ns, id", r.column,
                  r.filter, r.order),
      run,
      [](const Stmt& s) {
        return SampleRow{s.col_int(0), s.col_text(1), s.col_double(2), s.col_int(3)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<CollectiveRow> Reader::collectives(int64_t run, std::optional<int64_t> rank) {
  if (impl_->version < 4) return {};
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  return impl_->query<CollectiveRow>(
      fmt::format("SELECT rank, iteration, thread, collective, label, bytes, start_ns, end_ns FROM collectives "
                  "WHERE run_id = ?1{} ORDER BY {}start_ns, id",
                  r.filter, r.order),
      run,
      [](const Stmt& s) {
        return CollectiveRow{s.col_int(0),  s.col_int(1), s.col_int(2), s.col_text(3),
                             s.col_text(4), s.col_int(5), s.col_int(6), s.col_int(7)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<CommOpRow> Reader::comm_ops(int64_t run) {
  if (impl_->version < 4) return {};
  return impl_->query<CommOpRow>(
      "SELECT rank, backend, collective, bytes, ranks, count, total_ns, mean_ns, min_ns, max_ns, algbw_gbps, "
      "busbw_gbps FROM comm_ops WHERE run_id = ?1 ORDER BY rank, collective, bytes, id",
      run, [](const Stmt& s) {
        return CommOpRow{s.col_int(0), s.col_text(1), s.col_text(2),    s.col_int(3),
                         s.col_int(4), s.col_int(5),  s.col_int(6),     s.col_double(7),
                         s.col_int(8), s.col_int(9),  s.col_double(10), s.col_double(11)};
      });
}

std::vector<RankClockRow> Reader::rank_clocks(int64_t run) {
  if (impl_->version < 11) return {};  // measured since v11: before, nothing says how the ranks' clocks relate
  return impl_->query<RankClockRow>(
      "SELECT rank, phase, offset_ns, uncertainty_ns, at_ns, min_round_trip_ns, pings FROM rank_clocks "
      "WHERE run_id = ?1 ORDER BY rank, phase, id",
      run, [](const Stmt& s) {
        return RankClockRow{s.col_int(0), s.col_text(1), s.col_int(2), s.col_int(3),
                            s.col_int(4), s.col_int(5),  s.col_int(6)};
      });
}

std::vector<CollectiveWaitRow> Reader::collective_waits(int64_t run) {
  if (impl_->version < 13) return {};
  return impl_->query<CollectiveWaitRow>(
      "SELECT rank, iteration, collective, label, call, bytes, arrival_ns, last_arrival_ns, last_rank, waiting_ns, "
      "moving_ns, uncertainty_ns FROM collective_waits WHERE run_id = ?1 "
      "ORDER BY iteration, collective, label, call, rank, id",
      run, [](const Stmt& s) {
        return CollectiveWaitRow{s.col_int(0), s.col_int(1), s.col_text(2), s.col_text(3),
                                 s.col_int(4), s.col_int(5), s.col_int(6),  s.col_int(7),
                                 s.col_int(8), s.col_int(9), s.col_int(10), s.col_int(11)};
      });
}

std::vector<RankBreakdownRow> Reader::rank_breakdown(int64_t run) {
  if (impl_->version < 4) return {};
  return impl_->query<RankBreakdownRow>(
      fmt::format("SELECT rank, iteration, start_ns, end_ns, compute_ns, comm_ns, overlap_ns, exposed_comm_ns, "
                  "idle_ns, backward_wait_ns, {} FROM rank_breakdown WHERE run_id = ?1 ORDER BY rank, iteration, id",
                  impl_->version >= 6 ? "pull_wait_ns, push_wait_ns" : "0, 0"),
      run, [](const Stmt& s) {
        return RankBreakdownRow{s.col_int(0), s.col_int(1), s.col_int(2), s.col_int(3), s.col_int(4),  s.col_int(5),
                                s.col_int(6), s.col_int(7), s.col_int(8), s.col_int(9), s.col_int(10), s.col_int(11)};
      });
}

std::vector<CollectiveBenchRow> Reader::collective_bench(int64_t run) {
  if (impl_->version < 4) return {};
  // Before v12 the factor is what the row's figures imply (as the v12 migration sets it).
  const std::string_view v12 = impl_->version >= 12
                                   ? "bus_factor, p50_ns, p99_ns, samples"
                                   : "CASE WHEN algbw_gbps > 0 THEN busbw_gbps / algbw_gbps ELSE 0 END, -1, -1, 0";
  const std::string_view v15 = impl_->version >= 15 ? "beside_rate, beside_ns" : "-1, -1";
  return impl_->query<CollectiveBenchRow>(
      fmt::format("SELECT backend, collective, bytes, ranks, iterations, time_ns, algbw_gbps, busbw_gbps, min_time_ns, "
                  "max_time_ns, {}, {} FROM collective_bench WHERE run_id = ?1 ORDER BY id",
                  v12, v15),
      run, [](const Stmt& s) {
        return CollectiveBenchRow{s.col_text(0),    s.col_text(1),   s.col_int(2),     s.col_int(3),
                                  s.col_int(4),     s.col_double(5), s.col_double(6),  s.col_double(7),
                                  s.col_int(8),     s.col_int(9),    s.col_double(10), s.col_double(11),
                                  s.col_double(12), s.col_int(13),   s.col_double(14), s.col_double(15)};
      });
}

std::vector<CollectiveBenchSamplesRow> Reader::collective_bench_samples(int64_t run) {
  if (impl_->version < 12) return {};  // the calls were not kept before v12
  return impl_->query<CollectiveBenchSamplesRow>(
      "SELECT collective, bytes, rank, time_ns FROM collective_bench_samples WHERE run_id = ?1 "
      "ORDER BY collective, bytes, rank, id",
      run, [](const Stmt& s) {
        return CollectiveBenchSamplesRow{s.col_text(0), s.col_int(1), s.col_int(2), decode_series(s.col_text(3))};
      });
}

std::vector<PsStalenessRow> Reader::ps_staleness(int64_t run) {
  if (impl_->version < 6) return {};
  return impl_->query<PsStalenessRow>(
      "SELECT rank, iteration, kind, staleness, count FROM ps_staleness WHERE run_id = ?1 "
      "ORDER BY kind, rank, iteration, staleness, id",
      run, [](const Stmt& s) {
        return PsStalenessRow{s.col_int(0), s.col_int(1), s.col_text(2), s.col_int(3), s.col_int(4)};
      });
}

std::vector<PsServerRow> Reader::ps_servers(int64_t run) {
  if (impl_->version < 6) return {};
  return impl_->query<PsServerRow>(
      "SELECT server, rank, keys, bytes_held, bytes_in, bytes_out, pushes, pulls, updates, busy_ns, queue_max, "
      "queue_mean FROM ps_servers WHERE run_id = ?1 ORDER BY server, id",
      run, [](const Stmt& s) {
        PsServerRow r;
        r.server = s.col_int(0);
        r.rank = s.col_int(1);
        r.keys = s.col_int(2);
        r.bytes_held = s.col_int(3);
        r.bytes_in = s.col_int(4);
        r.bytes_out = s.col_int(5);
        r.pushes = s.col_int(6);
        r.pulls = s.col_int(7);
        r.updates = s.col_int(8);
        r.busy_ns = s.col_int(9);
        r.queue_max = s.col_int(10);
        r.queue_mean = s.col_double(11);
        return r;
      });
}

std::vector<GradientRow> Reader::gradients(int64_t run, std::optional<int64_t> rank) {
  if (impl_->version < 15) return {};
  const RankSql r = rank_sql(impl_->version, rank, "", 2);
  return impl_->query<GradientRow>(
      fmt::format("SELECT grp, slot, name, bytes, rank FROM gradients WHERE run_id = ?1{} ORDER BY {}grp, slot, id",
                  r.filter, r.order),
      run,
      [](const Stmt& s) {
        return GradientRow{s.col_int(0), s.col_int(1), s.col_text(2), s.col_int(3), s.col_int(4)};
      },
      [&](Stmt& s) { r.bind(s); });
}

std::vector<ProjectionRow> Reader::projections() {
  if (impl_->version < 15) return {};
  Stmt s(impl_->db, std::string(kProjectionColumns) + " ORDER BY id");
  Stmt::Use use(s);
  std::vector<ProjectionRow> out;
  while (s.step()) out.push_back(projection_row(s));
  return out;
}

std::optional<ProjectionRow> Reader::projection_of(int64_t projection_run) {
  if (impl_->version < 15) return std::nullopt;
  auto rows = impl_->query<ProjectionRow>(std::string(kProjectionColumns) + " WHERE run_id = ?1 ORDER BY id LIMIT 1",
                                          projection_run, projection_row);
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

std::vector<ProjectionRow> Reader::projections_of_measured(int64_t measured_run) {
  if (impl_->version < 15 || measured_run <= 0) return {};  // 0: the unmeasured projections' "none"
  return impl_->query<ProjectionRow>(std::string(kProjectionColumns) + " WHERE measured_run_id = ?1 ORDER BY id",
                                     measured_run, projection_row);
}

}  // namespace ts::store
