// Builds the timeline's level of detail (store/timeline_index.h) in two passes over a run's
// events: one grouped query for the lanes and the run's extent, then one streamed in index order
// (rank, start), so nothing is sorted by SQLite and memory stays per lane, not per event.
#include "store/timeline_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace ts::store::detail {

bool has_table(Db& db, std::string_view table) {
  Stmt s(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1");
  Stmt::Use use(s);
  s.bind(1, table).step();
  return s.col_int(0) > 0;
}

bool has_column(Db& db, std::string_view table, std::string_view column) {
  Stmt s(db, "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2");
  Stmt::Use use(s);
  s.bind(1, table).bind(2, column).step();
  return s.col_int(0) > 0;
}

namespace {

struct Tile {
  int level;
  int64_t bucket;
  int lane, depth;
  int64_t events, busy_ns, name_id;
  auto key() const { return std::tie(level, bucket, lane, depth); }
};

// One bucket being summed. The name kept is the one with the most time in it, found among a few
// candidates (space-saving: a newcomer replaces the weakest and inherits its time), exact while a
// bucket holds at most kCandidates names.
struct Accumulator {
  static constexpr int kCandidates = 4;
  int64_t bucket = -1, events = 0, busy_ns = 0;
  std::array<std::pair<int64_t, int64_t>, kCandidates> names{};  // (name id, ns)
  int used = 0;

  void add_name(int64_t name, int64_t ns) {
    for (int i = 0; i < used; ++i)
      if (names[i].first == name) {
        names[i].second += ns;
        return;
      }
    if (used < kCandidates) {
      names[used++] = {name, ns};
      return;
    }
    auto weakest = std::min_element(names.begin(), names.end(), [](auto& a, auto& b) { return a.second < b.second; });
    *weakest = {name, weakest->second + ns};
  }
  int64_t top_name() const {
    const auto best =
        std::max_element(names.begin(), names.begin() + used, [](auto& a, auto& b) { return a.second < b.second; });
    return used == 0 ? 0 : best->first;
  }
};

struct Lane {
  int index = 0;
  bool gpu = false;
  int64_t rank = 0, thread = 0;
  std::string label;
  int64_t events = 0;
  int depths = 0;
  std::vector<std::pair<int64_t, int>> open;  // (end, depth) of the events enclosing the next one
  // Per depth, per level: the bucket being summed and the one after it (an event shorter than a
  // bucket reaches at most one bucket further).
  std::vector<std::vector<std::array<Accumulator, 2>>> sums;
};

class Builder {
 public:
  Builder(Db& target, int64_t run, TimelineGeometry geometry)
      : run_(run),
        geo_(geometry),
        span_insert_(
            target,
            "INSERT INTO timeline_spans (run_id, size_class, lane, depth, start_ns, end_ns, source_id, name_id) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)") {}

  // Events of one lane arrive by start, the longer first among equal starts.
  void add(Lane& lane, int64_t id, int64_t start, int64_t end, int64_t name) {
    while (!lane.open.empty() && lane.open.back().first <= start) lane.open.pop_back();
    const int depth = lane.open.empty() ? 0 : lane.open.back().second + 1;
    lane.open.emplace_back(end, depth);
    lane.depths = std::max(lane.depths, depth + 1);
    ++lane.events;
    if (static_cast<int>(lane.sums.size()) <= depth)
      lane.sums.resize(depth + 1, std::vector<std::array<Accumulator, 2>>(geo_.levels));

    const int64_t duration = end - start;
    int size_class = -1;
    if (duration >= geo_.base_ns) {
      size_class = 0;
      while (size_class + 1 < geo_.levels && duration >= geo_.bucket_ns(size_class + 1)) ++size_class;
      Stmt::Use use(span_insert_);
      span_insert_.bind(1, run_).bind(2, size_class).bind(3, lane.index).bind(4, depth);
      span_insert_.bind(5, start).bind(6, end).bind(7, id).bind(8, name).run();
    }
    for (int level = size_class + 1; level < geo_.levels; ++level) sum(lane, depth, level, start, end, name);
  }

  // Every tile, in the table's key order.
  std::vector<Tile> finish(std::vector<Lane>& lanes) {
    for (auto& lane : lanes)
      for (size_t depth = 0; depth < lane.sums.size(); ++depth)
        for (int level = 0; level < geo_.levels; ++level)
          for (auto& acc : lane.sums[depth][level]) flush(lane, static_cast<int>(depth), level, acc);
    std::sort(tiles_.begin(), tiles_.end(), [](const Tile& a, const Tile& b) { return a.key() < b.key(); });
    return std::move(tiles_);
  }

 private:
  void sum(Lane& lane, int depth, int level, int64_t start, int64_t end, int64_t name) {
    auto& [cur, next] = lane.sums[depth][level];
    const int64_t width = geo_.bucket_ns(level);
    const int64_t bucket = (start - geo_.origin_ns) / width;
    if (bucket != cur.bucket) {
      flush(lane, depth, level, cur);
      if (next.bucket == bucket) {
        cur = next;
      } else {
        flush(lane, depth, level, next);
        cur.bucket = bucket;
      }
      next = Accumulator{};
    }
    const int64_t bucket_end = geo_.origin_ns + (bucket + 1) * width;
    const int64_t inside = std::min(end, bucket_end) - start;
    ++cur.events;
    cur.busy_ns += inside;
    cur.add_name(name, inside);
    if (end > bucket_end) {  // the rest lies in the next bucket (the event is shorter than one)
      next.bucket = bucket + 1;
      next.busy_ns += end - bucket_end;
      next.add_name(name, end - bucket_end);
    }
  }

  void flush(const Lane& lane, int depth, int level, Accumulator& acc) {
    if (acc.bucket >= 0 && (acc.events > 0 || acc.busy_ns > 0))
      tiles_.push_back({level, acc.bucket, lane.index, depth, acc.events, acc.busy_ns, acc.top_name()});
    acc = Accumulator{};
  }

  int64_t run_;
  TimelineGeometry geo_;
  Stmt span_insert_;
  std::vector<Tile> tiles_;
};

// Dispatches rows arriving by (group, start) to their lanes, holding back the rows of one start
// so that among equal starts the longer goes first (a range streamed after what it encloses).
class TieOrder {
 public:
  struct Row {
    Lane* lane;
    int64_t id, start, end, name;
  };
  explicit TieOrder(Builder& builder) : builder_(builder) {}
  void push(const Row& row) {
    if (!held_.empty() && held_.front().start != row.start) release();
    held_.push_back(row);
  }
  void release() {
    std::stable_sort(held_.begin(), held_.end(), [](const Row& a, const Row& b) { return a.end > b.end; });
    for (const auto& r : held_) builder_.add(*r.lane, r.id, r.start, r.end, r.name);
    held_.clear();
  }

 private:
  Builder& builder_;
  std::vector<Row> held_;
};

}  // namespace

void create_timeline_tables(Db& target) {
  target.exec(R"sql(
CREATE TABLE IF NOT EXISTS timeline_index (run_id INTEGER PRIMARY KEY, origin_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL, base_ns INTEGER NOT NULL, levels INTEGER NOT NULL, events INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS timeline_lanes (run_id INTEGER NOT NULL, lane INTEGER NOT NULL, source TEXT NOT NULL,
  rank INTEGER NOT NULL, thread INTEGER NOT NULL, label TEXT NOT NULL, depths INTEGER NOT NULL,
  events INTEGER NOT NULL, PRIMARY KEY (run_id, lane)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS timeline_tiles (run_id INTEGER NOT NULL, level INTEGER NOT NULL, bucket INTEGER NOT NULL,
  lane INTEGER NOT NULL, depth INTEGER NOT NULL, events INTEGER NOT NULL, busy_ns INTEGER NOT NULL,
  name_id INTEGER NOT NULL, PRIMARY KEY (run_id, level, bucket, lane, depth)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS timeline_spans (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, size_class INTEGER NOT NULL,
  lane INTEGER NOT NULL, depth INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  source_id INTEGER NOT NULL, name_id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS timeline_spans_run_class ON timeline_spans(run_id, size_class, start_ns);
)sql");
}

void build_timeline_index(Db& source, Db& target, int64_t run) {
  for (const char* table : {"timeline_index", "timeline_lanes", "timeline_tiles", "timeline_spans"}) {
    Stmt drop(target, fmt::format("DELETE FROM {} WHERE run_id = ?1", table));
    Stmt::Use use(drop);
    drop.bind(1, run).run();
  }

  // Pass 1: the lanes, their roles, and the run's extent.
  const std::string rank = has_column(source, "events", "rank") ? "rank" : "0";
  const bool gpu = has_table(source, "gpu_activities");
  std::vector<Lane> lanes;
  std::map<std::pair<int64_t, int64_t>, size_t> cpu_lane, gpu_lane;
  int64_t first = INT64_MAX, last = INT64_MIN, total = 0;
  auto extend = [&](Stmt& s) {
    first = std::min(first, s.col_int(2));
    last = std::max(last, s.col_int(3));
    total += s.col_int(4);
  };
  {
    Stmt s(source, fmt::format("SELECT {0}, thread, min(start_ns), max(end_ns), count(*), "
                               "max(kind_id IN (SELECT id FROM strings WHERE value IN ('run', 'iteration'))), "
                               "max(kind_id = (SELECT id FROM strings WHERE value = 'phase')), "
                               "max(kind_id = (SELECT id FROM strings WHERE value = 'comm')) "
                               "FROM events WHERE run_id = ?1 GROUP BY {0}, thread ORDER BY {0}, thread",
                               rank));
    Stmt::Use use(s);
    s.bind(1, run);
    // A thread's role from what it recorded: the loop's (iterations), a learner's (phases of its
    // own while another thread runs the loop, as A3C's), communication, or another worker.
    std::map<int64_t, bool> rank_has_loop;
    std::vector<std::pair<bool, bool>> loop_and_phases;
    while (s.step()) {
      Lane lane;
      lane.rank = s.col_int(0);
      lane.thread = s.col_int(1);
      lane.label = s.col_int(7) != 0 ? "communication" : "worker";
      loop_and_phases.emplace_back(s.col_int(5) != 0, s.col_int(6) != 0);
      rank_has_loop[lane.rank] = rank_has_loop[lane.rank] || s.col_int(5) != 0;
      cpu_lane[{lane.rank, lane.thread}] = lanes.size();
      lanes.push_back(std::move(lane));
      extend(s);
    }
    for (size_t i = 0; i < lanes.size(); ++i) {
      const auto [loop, phases] = loop_and_phases[i];
      if (loop || (phases && !rank_has_loop[lanes[i].rank])) lanes[i].label = "training";
      else if (phases) lanes[i].label = "learner";
    }
  }
  if (gpu) {
    Stmt s(source, "SELECT device, stream, min(start_ns), max(end_ns), count(*) FROM gpu_activities WHERE run_id = ?1 "
                   "GROUP BY device, stream ORDER BY device, stream");
    Stmt::Use use(s);
    s.bind(1, run);
    while (s.step()) {
      Lane lane;
      lane.gpu = true;
      lane.rank = s.col_int(0);
      lane.thread = s.col_int(1);
      lane.label = "stream";
      gpu_lane[{lane.rank, lane.thread}] = lanes.size();
      lanes.push_back(std::move(lane));
      extend(s);
    }
  }
  for (size_t i = 0; i < lanes.size(); ++i) lanes[i].index = static_cast<int>(i);
  if (total == 0) return;  // nothing traced: no index, and the reader draws an empty timeline
  // Clock readings are nanoseconds of a steady clock, far inside +-2^62; outside, the file is
  // damaged (and the arithmetic below would overflow).
  constexpr int64_t kLimit = int64_t{1} << 62;
  if (first < -kLimit || last > kLimit || last < first)
    throw StoreError(StoreError::Kind::corrupt,
                     fmt::format("run {}'s events span impossible times ({} to {} ns)", run, first, last));

  // Level 0 holds about one bucket per 8 events, so the finest summary a window needs before it
  // switches to raw events has ~8 events a bucket; the top level spans the run in a few hundred.
  TimelineGeometry geo;
  geo.origin_ns = first;
  const int64_t extent = std::max<int64_t>(1, last - first);
  geo.base_ns = static_cast<int64_t>(
      std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(1, (extent / std::max<int64_t>(1, total)) * 8))));
  while (geo.levels < kMaxTimelineLevels && geo.bucket_ns(geo.levels - 1) * kTopLevelBuckets < extent) ++geo.levels;

  // Pass 2: every event, per rank by start (the index's order), then the GPU's by start.
  Builder builder(target, run, geo);
  {
    TieOrder order(builder);
    Stmt s(source, fmt::format("SELECT id, {0}, thread, start_ns, end_ns, name_id FROM events WHERE run_id = ?1 "
                               "ORDER BY {0}, start_ns",
                               rank));
    Stmt::Use use(s);
    s.bind(1, run);
    int64_t held_rank = INT64_MIN;
    while (s.step()) {
      if (s.col_int(1) != held_rank) order.release();
      held_rank = s.col_int(1);
      const auto lane = cpu_lane.find({s.col_int(1), s.col_int(2)});
      if (lane == cpu_lane.end()) continue;  // written between the passes (a caller without a snapshot)
      order.push({&lanes[lane->second], s.col_int(0), s.col_int(3), s.col_int(4), s.col_int(5)});
    }
    order.release();
  }
  if (gpu) {
    TieOrder order(builder);
    Stmt s(source, "SELECT id, device, stream, start_ns, end_ns, name_id FROM gpu_activities WHERE run_id = ?1 "
                   "ORDER BY start_ns");
    Stmt::Use use(s);
    s.bind(1, run);
    while (s.step()) {
      const auto lane = gpu_lane.find({s.col_int(1), s.col_int(2)});
      if (lane == gpu_lane.end()) continue;
      order.push({&lanes[lane->second], s.col_int(0), s.col_int(3), s.col_int(4), s.col_int(5)});
    }
    order.release();
  }

  Stmt tile(target, "INSERT INTO timeline_tiles (run_id, level, bucket, lane, depth, events, busy_ns, name_id) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  for (const Tile& t : builder.finish(lanes)) {
    Stmt::Use use(tile);
    tile.bind(1, run).bind(2, t.level).bind(3, t.bucket).bind(4, t.lane).bind(5, t.depth);
    tile.bind(6, t.events).bind(7, t.busy_ns).bind(8, t.name_id).run();
  }
  Stmt lane_insert(target, "INSERT INTO timeline_lanes (run_id, lane, source, rank, thread, label, depths, events) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  for (const Lane& lane : lanes) {
    Stmt::Use use(lane_insert);
    lane_insert.bind(1, run).bind(2, lane.index).bind(3, std::string_view(lane.gpu ? "gpu" : "cpu")).bind(4, lane.rank);
    lane_insert.bind(5, lane.thread).bind(6, lane.label).bind(7, lane.depths).bind(8, lane.events).run();
  }
  Stmt index(target, "INSERT INTO timeline_index (run_id, origin_ns, end_ns, base_ns, levels, events) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  Stmt::Use use(index);
  index.bind(1, run).bind(2, geo.origin_ns).bind(3, last).bind(4, geo.base_ns).bind(5, geo.levels).bind(6, total);
  index.run();
}

}  // namespace ts::store::detail
