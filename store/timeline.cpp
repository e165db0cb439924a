#include "store/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "store/open.h"
#include "store/timeline_index.h"
#include "vocabulary/collective_wait.h"

namespace ts::store {
namespace fs = std::filesystem;
using detail::Db;
using detail::Stmt;

struct TimelineReader::Impl {
  Impl(const fs::path& path, int64_t run_id) : file(detail::open_for_read(path, version)), run(run_id) {
    {
      Stmt s(file, "SELECT count(*) FROM runs WHERE id = ?1");
      Stmt::Use use(s);
      if (!s.bind(1, run).step() || s.col_int(0) == 0)
        throw StoreError(StoreError::Kind::not_found, fmt::format("'{}' has no run {}", path.string(), run));
    }
    has_rank = detail::has_column(file, "events", "rank");
    has_gpu = detail::has_table(file, "gpu_activities");
    has_collectives = detail::has_table(file, "collectives");
    stored = version >= 5 && read_geometry(file);
    if (!stored) {
      // No index written for this run (running, lost, or a file before v5): build one beside it.
      memory = std::make_unique<Db>(Db::from_uri(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
      detail::create_timeline_tables(*memory);
      // One read transaction: a run still being written is read as one snapshot by both passes.
      file.exec("BEGIN");
      memory->exec("BEGIN");
      detail::build_timeline_index(file, *memory, run);
      memory->exec("COMMIT");
      file.exec("COMMIT");
      read_geometry(*memory);
    }
    Stmt s(lod(), "SELECT lane, source, rank, thread, label, depths, events FROM timeline_lanes WHERE run_id = ?1 "
                  "ORDER BY lane");
    Stmt::Use use(s);
    s.bind(1, run);
    while (s.step()) {
      lanes.push_back({static_cast<int>(s.col_int(0)), s.col_text(1), s.col_text(4), s.col_int(2), s.col_int(3),
                       static_cast<int>(s.col_int(5)), s.col_int(6)});
      lane_of[{lanes.back().source == "gpu", lanes.back().rank, lanes.back().thread}] = lanes.back().lane;
    }
  }

  Db& lod() { return memory ? *memory : file; }
  TimelineWindow raw_window(int64_t from_ns, int64_t to_ns, int pixels, const std::vector<bool>& wanted);
  // Rank `rank`'s CPU time `t` on rank 0's clock (the time itself without a clock for it).
  int64_t aligned(int64_t rank, int64_t t) const {
    const auto it = clocks.find(rank);
    return it == clocks.end() ? t : it->second.to_reference(t);
  }
  int64_t aligned_lane(int lane, int64_t t) const {
    return known_lane(lane) && lanes[static_cast<size_t>(lane)].source == "cpu"
               ? aligned(lanes[static_cast<size_t>(lane)].rank, t)
               : t;
  }
  // Every rank's part of the call a rank's collective row (iteration, collective, label; its own
  // start and id) belongs to: the k-th of that key on each rank in the order they began, as
  // reports/collective_split.h pairs them.
  using CallKey = std::tuple<int64_t, std::string, std::string>;
  void call_parts(TimelineEventDetails& d, const CallKey& key, int64_t own_start, int64_t own_id) {
    int64_t ranks = 1;
    {
      Stmt s(file, "SELECT ranks FROM runs WHERE id = ?1");
      Stmt::Use use(s);
      if (s.bind(1, run).step()) ranks = s.col_int(0);
    }
    if (ranks < 2) return;
    const auto& [iteration, collective, label] = key;
    Stmt s(file, "SELECT rank, thread, start_ns, end_ns, id FROM collectives WHERE run_id = ?1 AND iteration = ?2 AND "
                 "collective = ?3 AND label = ?4 ORDER BY rank, start_ns, id");
    Stmt::Use use(s);
    s.bind(1, run).bind(2, iteration).bind(3, collective).bind(4, label);
    std::vector<std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>> by_rank(static_cast<size_t>(ranks));
    int64_t k = 0;  // which call of the key the selected one is on its rank
    while (s.step()) {
      const int64_t rank = s.col_int(0);
      if (rank < 0 || rank >= ranks) continue;
      if (rank == d.rank && (s.col_int(2) < own_start || (s.col_int(2) == own_start && s.col_int(4) < own_id))) ++k;
      by_rank[static_cast<size_t>(rank)].emplace_back(s.col_int(1), s.col_int(2), s.col_int(3), s.col_int(4));
    }
    std::vector<TimelineCallPart> parts;
    bool clocks_known = true;
    for (int64_t rank = 0; rank < ranks; ++rank) {
      const auto& calls = by_rank[static_cast<size_t>(rank)];
      if (k >= static_cast<int64_t>(calls.size())) return;  // a rank without this call: no pairing
      const auto& [thread, start, end, id] = calls[static_cast<size_t>(k)];
      const auto lane = lane_of.find({false, rank, thread});
      parts.push_back({rank, lane == lane_of.end() ? -1 : lane->second, aligned(rank, start), aligned(rank, end)});
      clocks_known = clocks_known && (rank == 0 || clocks.contains(rank));
    }
    if (clocks_known) {
      const auto last = std::max_element(parts.begin(), parts.end(),
                                         [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
      d.call_last_rank = last->rank;
      for (auto& p : parts) {
        const auto part = vocabulary::wait_move(p.start_ns, p.end_ns, last->start_ns);
        p.waiting_ns = part.waiting_ns;
        p.moving_ns = part.moving_ns;
      }
    }
    d.call = std::move(parts);
  }

  // A row naming a lane the index does not list is skipped: a damaged file draws less, not wrong.
  bool known_lane(int64_t lane) const { return lane >= 0 && lane < static_cast<int64_t>(lanes.size()); }

  bool read_geometry(Db& db) {
    Stmt s(db, "SELECT origin_ns, end_ns, base_ns, levels, events FROM timeline_index WHERE run_id = ?1");
    Stmt::Use use(s);
    if (!s.bind(1, run).step()) return false;
    geo.origin_ns = s.col_int(0);
    end = s.col_int(1);
    geo.base_ns = s.col_int(2);
    geo.levels = static_cast<int>(s.col_int(3));
    events = s.col_int(4);
    if (geo.base_ns < 1 || geo.levels < 1 || geo.levels > detail::kMaxTimelineLevels ||
        geo.bucket_ns(geo.levels - 1) > (INT64_MAX >> 2))
      throw StoreError(
          StoreError::Kind::corrupt,
          fmt::format("run {}'s timeline index is impossible (base {} ns, {} levels)", run, geo.base_ns, geo.levels));
    return true;
  }

  const std::string& name(int64_t id) {
    auto it = names.find(id);
    if (it != names.end()) return it->second;
    Stmt::Use use(string_lookup);
    std::string value = string_lookup.bind(1, id).step() ? string_lookup.col_text(0) : std::string();
    return names.emplace(id, std::move(value)).first->second;
  }

  int version = 0;
  Db file;
  std::unique_ptr<Db> memory;
  int64_t run;
  bool has_rank = false, has_gpu = false, has_collectives = false, stored = false;
  detail::TimelineGeometry geo;
  int64_t events = 0, end = 0;
  std::vector<TimelineLane> lanes;
  std::map<std::tuple<bool, int64_t, int64_t>, int> lane_of;  // (gpu, rank or device, thread or stream)
  Stmt string_lookup{file, "SELECT value FROM strings WHERE id = ?1"};
  std::unordered_map<int64_t, std::string> names;
  std::map<int64_t, vocabulary::ClockModel> clocks;  // align(): by rank
  int64_t aligned_start = 0, aligned_end = 0;        // the run's extent on rank 0's clock
};

TimelineReader::TimelineReader(const fs::path& db, int64_t run) : impl_(std::make_unique<Impl>(db, run)) {}
TimelineReader::~TimelineReader() = default;
TimelineReader::TimelineReader(TimelineReader&&) noexcept = default;
TimelineReader& TimelineReader::operator=(TimelineReader&&) noexcept = default;

void TimelineReader::align(std::map<int64_t, vocabulary::ClockModel> clocks) {
  auto& m = *impl_;
  m.clocks = std::move(clocks);
  if (m.clocks.empty() || m.events == 0) return;
  // The extent on rank 0's clock: each rank's (and the GPU's) first start and last end, exactly.
  // The first is an indexed minimum. The last: an event ending after every other either is long
  // (a span of the index) or starts in, or in the bucket before, the group's last finest bucket
  // with events (a shorter one starting earlier ends before that bucket).
  struct Group {
    int64_t last_bucket = -1, spans_end = INT64_MIN;
  };
  std::map<int64_t, Group> groups;  // by rank; -1: the GPU lanes
  const auto group_of = [&](int64_t lane) -> Group& {
    const auto& l = m.lanes[static_cast<size_t>(lane)];
    return groups[l.source == "gpu" ? -1 : l.rank];
  };
  {
    Stmt s(m.lod(), "SELECT lane, max(bucket) FROM timeline_tiles WHERE run_id = ?1 AND level = 0 GROUP BY lane");
    Stmt::Use use(s);
    s.bind(1, m.run);
    while (s.step()) {
      if (!m.known_lane(s.col_int(0))) continue;
      Group& g = group_of(s.col_int(0));
      g.last_bucket = std::max(g.last_bucket, s.col_int(1));
    }
  }
  {
    Stmt s(m.lod(), "SELECT lane, max(end_ns) FROM timeline_spans WHERE run_id = ?1 GROUP BY lane");
    Stmt::Use use(s);
    s.bind(1, m.run);
    while (s.step()) {
      if (!m.known_lane(s.col_int(0))) continue;
      Group& g = group_of(s.col_int(0));
      g.spans_end = std::max(g.spans_end, s.col_int(1));
    }
  }
  m.aligned_start = INT64_MAX;
  m.aligned_end = INT64_MIN;
  const int64_t width = m.geo.bucket_ns(0);
  for (const auto& [rank, g] : groups) {
    const bool gpu = rank < 0;
    const std::string table = gpu ? "gpu_activities" : "events";
    const std::string mine = gpu || !m.has_rank ? "" : " AND rank = ?3";
    int64_t first = INT64_MAX, last = g.spans_end;
    const int64_t tail_from = g.last_bucket >= 0 ? m.geo.origin_ns + (g.last_bucket - 1) * width : INT64_MAX;
    Stmt s(m.file, fmt::format("SELECT (SELECT min(start_ns) FROM {0} WHERE run_id = ?1{1}), "
                               "(SELECT max(end_ns) FROM {0} WHERE run_id = ?1{1} AND start_ns >= ?2)",
                               table, mine));
    Stmt::Use use(s);
    s.bind(1, m.run).bind(2, tail_from);
    if (!mine.empty()) s.bind(3, rank);
    if (s.step()) {
      if (!s.col_null(0)) first = s.col_int(0);
      if (!s.col_null(1)) last = std::max(last, s.col_int(1));
    }
    if (first == INT64_MAX || last == INT64_MIN) continue;
    m.aligned_start = std::min(m.aligned_start, gpu ? first : m.aligned(rank, first));
    m.aligned_end = std::max(m.aligned_end, gpu ? last : m.aligned(rank, last));
  }
  if (m.aligned_start > m.aligned_end) m.aligned_start = m.geo.origin_ns, m.aligned_end = m.end;
}

bool TimelineReader::index_stored() const { return impl_->stored; }
int64_t TimelineReader::start_ns() const {
  if (impl_->events == 0) return 0;
  return impl_->clocks.empty() ? impl_->geo.origin_ns : impl_->aligned_start;
}
int64_t TimelineReader::end_ns() const {
  if (impl_->events == 0) return 0;
  return impl_->clocks.empty() ? impl_->end : impl_->aligned_end;
}
int64_t TimelineReader::event_count() const { return impl_->events; }
const std::vector<TimelineLane>& TimelineReader::lanes() const { return impl_->lanes; }

std::vector<TimelineBand> TimelineReader::bands() {
  auto& f = impl_->file;
  const std::string rank = impl_->has_rank ? "rank" : "0";
  std::vector<TimelineBand> out;
  {
    Stmt s(f, fmt::format("SELECT {}, idx, start_ns, end_ns, warmup FROM iterations WHERE run_id = ?1", rank));
    Stmt::Use use(s);
    s.bind(1, impl_->run);
    while (s.step()) out.push_back({s.col_int(0), s.col_int(1), s.col_int(2), s.col_int(3), {}, s.col_int(4) != 0});
  }
  Stmt s(f, fmt::format("SELECT {}, iteration, start_ns, end_ns, phase FROM phases WHERE run_id = ?1", rank));
  Stmt::Use use(s);
  s.bind(1, impl_->run);
  while (s.step()) out.push_back({s.col_int(0), s.col_int(1), s.col_int(2), s.col_int(3), s.col_text(4), false});
  for (auto& b : out) {
    b.start_ns = impl_->aligned(b.rank, b.start_ns);
    b.end_ns = impl_->aligned(b.rank, b.end_ns);
  }
  std::sort(out.begin(), out.end(), [](const TimelineBand& a, const TimelineBand& b) {
    return std::tie(a.rank, a.start_ns, a.phase) < std::tie(b.rank, b.start_ns, b.phase);
  });
  return out;
}

// The window on the lanes' own clocks, of the lanes `wanted` marks (empty: all of them).
TimelineWindow TimelineReader::Impl::raw_window(int64_t from_ns, int64_t to_ns, int pixels,
                                                const std::vector<bool>& wanted) {
  auto& m = *this;
  const auto want = [&](int64_t lane) { return wanted.empty() || wanted[static_cast<size_t>(lane)]; };
  TimelineWindow w;
  w.from_ns = from_ns;
  w.to_ns = std::max(to_ns, from_ns + 1);
  if (m.events == 0) return w;
  const double ns_per_pixel = static_cast<double>(w.to_ns - w.from_ns) / std::max(1, pixels);
  // The coarsest level whose buckets are at most two pixels wide: between half a bucket and two
  // per pixel (levels are 4x apart), so a window holds at most ~2 summaries a pixel per row.
  for (int level = m.geo.levels - 1; level >= 0; --level)
    if (static_cast<double>(m.geo.bucket_ns(level)) <= 2 * ns_per_pixel) {
      w.level = level;
      break;
    }

  if (w.level >= 0) {
    const int64_t width = m.geo.bucket_ns(w.level);
    w.bucket_ns = width;
    Stmt s(m.lod(), "SELECT bucket, lane, depth, events, busy_ns, name_id FROM timeline_tiles "
                    "WHERE run_id = ?1 AND level = ?2 AND bucket BETWEEN ?3 AND ?4");
    Stmt::Use use(s);
    s.bind(1, m.run).bind(2, w.level);
    s.bind(3, (w.from_ns - m.geo.origin_ns) / width - 1).bind(4, (w.to_ns - m.geo.origin_ns) / width);
    while (s.step()) {
      if (!m.known_lane(s.col_int(1)) || !want(s.col_int(1))) continue;
      const int64_t start = m.geo.origin_ns + s.col_int(0) * width;
      if (start + width <= w.from_ns || start >= w.to_ns) continue;
      w.tiles.push_back({static_cast<int>(s.col_int(1)), static_cast<int>(s.col_int(2)), start, start + width,
                         s.col_int(3), s.col_int(4), m.name(s.col_int(5))});
    }
    std::sort(w.tiles.begin(), w.tiles.end(), [](const TimelineTile& a, const TimelineTile& b) {
      return std::tie(a.lane, a.depth, a.start_ns) < std::tie(b.lane, b.depth, b.start_ns);
    });
  }

  // The events drawn alone: spans of every size class a bucket of this level cannot hold. A span
  // of class c is shorter than the next class's bound, so it starts no earlier than that before
  // the window; the top class is open-ended and few (the run holds at most ~256 per lane and depth).
  {
    Stmt s(m.lod(), "SELECT lane, depth, start_ns, end_ns, source_id, name_id FROM timeline_spans "
                    "WHERE run_id = ?1 AND size_class = ?2 AND start_ns BETWEEN ?3 AND ?4 AND end_ns >= ?5");
    for (int c = std::max(0, w.level); c < m.geo.levels; ++c) {
      Stmt::Use use(s);
      const int64_t earliest = c + 1 < m.geo.levels ? w.from_ns - m.geo.bucket_ns(c + 1) : INT64_MIN;
      s.bind(1, m.run).bind(2, c).bind(3, earliest).bind(4, w.to_ns);
      s.bind(5, w.from_ns);
      while (s.step()) {
        if (!m.known_lane(s.col_int(0)) || !want(s.col_int(0))) continue;
        const int lane = static_cast<int>(s.col_int(0));
        w.events.push_back({lane, static_cast<int>(s.col_int(1)), s.col_int(2), s.col_int(3), s.col_int(4),
                            m.lanes[lane].source == "gpu", m.name(s.col_int(5))});
      }
    }
  }

  if (w.level < 0) {
    // Zoomed in past level 0: the short events too, straight from the trace. Their depth is not
    // stored; it follows from the events enclosing them, which overlap the window, so are here.
    std::vector<TimelineEvent> raw;
    const int64_t first = w.from_ns - m.geo.base_ns;
    auto fetch = [&](std::string_view sql, bool gpu, std::optional<int64_t> rank) {
      Stmt s(m.file, sql);
      Stmt::Use use(s);
      s.bind(1, m.run).bind(2, first).bind(3, w.to_ns).bind(4, w.from_ns).bind(5, m.geo.base_ns);
      if (rank) s.bind(6, *rank);
      while (s.step()) {
        const auto lane = m.lane_of.find({gpu, s.col_int(1), s.col_int(2)});
        if (lane == m.lane_of.end() || !want(lane->second)) continue;  // unknown: written after the index
        raw.push_back({lane->second, -1, s.col_int(3), s.col_int(4), s.col_int(0), gpu, m.name(s.col_int(5))});
      }
    };
    std::vector<int64_t> ranks;  // those with a lane wanted
    bool gpu_wanted = false;
    for (const auto& lane : m.lanes) {
      if (!want(lane.lane)) continue;
      if (lane.source == "gpu") gpu_wanted = true;
      else if (ranks.empty() || ranks.back() != lane.rank) ranks.push_back(lane.rank);
    }
    for (const int64_t rank : ranks)
      fetch(fmt::format("SELECT id, {0}, thread, start_ns, end_ns, name_id FROM events WHERE run_id = ?1{1} "
                        "AND start_ns BETWEEN ?2 AND ?3 AND end_ns >= ?4 AND end_ns - start_ns < ?5",
                        m.has_rank ? "rank" : "0", m.has_rank ? " AND rank = ?6" : ""),
            false, m.has_rank ? std::optional<int64_t>(rank) : std::nullopt);
    if (m.has_gpu && gpu_wanted)
      fetch("SELECT id, device, stream, start_ns, end_ns, name_id FROM gpu_activities WHERE run_id = ?1 "
            "AND start_ns BETWEEN ?2 AND ?3 AND end_ns >= ?4 AND end_ns - start_ns < ?5",
            true, std::nullopt);
    // Merge with the spans by lane and start (the longer first), then stack: an event's depth is
    // one more than the innermost event still open when it starts.
    std::vector<TimelineEvent> all = std::move(w.events);
    all.insert(all.end(), raw.begin(), raw.end());
    std::sort(all.begin(), all.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
      if (a.lane != b.lane) return a.lane < b.lane;
      if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
      return a.end_ns > b.end_ns;
    });
    std::vector<std::pair<int64_t, int>> open;  // (end, depth)
    for (size_t i = 0; i < all.size(); ++i) {
      if (i == 0 || all[i].lane != all[i - 1].lane) open.clear();
      while (!open.empty() && open.back().first <= all[i].start_ns) open.pop_back();
      if (all[i].depth < 0) all[i].depth = open.empty() ? 0 : open.back().second + 1;
      open.emplace_back(all[i].end_ns, all[i].depth);
    }
    w.events = std::move(all);
  }
  std::sort(w.events.begin(), w.events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
    return std::tie(a.lane, a.depth, a.start_ns) < std::tie(b.lane, b.depth, b.start_ns);
  });
  return w;
}

TimelineWindow TimelineReader::window(int64_t from_ns, int64_t to_ns, int pixels) {
  auto& m = *impl_;
  if (m.clocks.empty()) return m.raw_window(from_ns, to_ns, pixels, {});
  // Each rank's lanes are read on their own clock, over the window moved by that rank's offset
  // (taken at the window's middle: over a window the drift moves it by less than a nanosecond per
  // millisecond), and set back on rank 0's; then the lanes on rank 0's own clock.
  TimelineWindow w;
  w.from_ns = from_ns;
  w.to_ns = std::max(to_ns, from_ns + 1);
  const int64_t middle = w.from_ns + (w.to_ns - w.from_ns) / 2;
  std::vector<bool> unmoved(m.lanes.size(), true);
  auto take = [&](const TimelineWindow& part, int64_t shift) {
    w.level = part.level;
    w.bucket_ns = part.bucket_ns;
    for (auto t : part.tiles) {
      t.start_ns -= shift;
      t.end_ns -= shift;
      w.tiles.push_back(std::move(t));
    }
    for (auto e : part.events) {
      e.start_ns -= shift;
      e.end_ns -= shift;
      w.events.push_back(std::move(e));
    }
  };
  for (const auto& [rank, clock] : m.clocks) {
    std::vector<bool> lanes(m.lanes.size(), false);
    bool any = false;
    for (const auto& l : m.lanes)
      if (l.source == "cpu" && l.rank == rank) lanes[static_cast<size_t>(l.lane)] = any = true;
    if (!any) continue;
    for (size_t i = 0; i < lanes.size(); ++i) unmoved[i] = unmoved[i] && !lanes[i];
    const int64_t shift = clock.from_reference(middle) - middle;
    take(m.raw_window(w.from_ns + shift, w.to_ns + shift, pixels, lanes), shift);
  }
  if (std::find(unmoved.begin(), unmoved.end(), true) != unmoved.end())
    take(m.raw_window(w.from_ns, w.to_ns, pixels, unmoved), 0);
  std::sort(w.tiles.begin(), w.tiles.end(), [](const TimelineTile& a, const TimelineTile& b) {
    return std::tie(a.lane, a.depth, a.start_ns) < std::tie(b.lane, b.depth, b.start_ns);
  });
  std::sort(w.events.begin(), w.events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
    return std::tie(a.lane, a.depth, a.start_ns) < std::tie(b.lane, b.depth, b.start_ns);
  });
  return w;
}

TimelineEventDetails TimelineReader::details(const TimelineEvent& event) {
  auto& m = *impl_;
  TimelineEventDetails d;
  d.event = event;
  const TimelineLane* lane =
      event.lane >= 0 && event.lane < static_cast<int>(m.lanes.size()) ? &m.lanes[event.lane] : nullptr;
  if (lane != nullptr)
    d.source_label = lane->source == "gpu"
                         ? fmt::format("GPU {} · stream {}", lane->rank, lane->thread)
                         : fmt::format("rank {} · {} (thread {})", lane->rank, lane->label, lane->thread);
  if (!event.gpu) {
    Stmt s(m.file,
           fmt::format("SELECT layer_id, kind_id, pass_id, iteration, {}, thread, name_id, start_ns FROM events "
                       "WHERE id = ?1 AND run_id = ?2",
                       m.has_rank ? "rank" : "0"));
    Stmt::Use use(s);
    if (!s.bind(1, event.id).bind(2, m.run).step()) return d;
    d.layer = m.name(s.col_int(0));
    d.kind = m.name(s.col_int(1));
    d.pass = m.name(s.col_int(2));
    d.iteration = s.col_int(3);
    d.rank = s.col_int(4);
    d.thread = s.col_int(5);
    d.event.name = m.name(s.col_int(6));
    if (d.kind == "comm" && m.has_collectives) {
      Stmt c(m.file,
             "SELECT bytes, collective, label, iteration, id FROM collectives WHERE run_id = ?1 AND rank = ?2 AND "
             "thread = ?3 AND start_ns = ?4 LIMIT 1");
      Stmt::Use use_c(c);
      // On the rank's own clock, as stored (the event may have been set on rank 0's).
      const int64_t own_start = s.col_int(7);
      if (c.bind(1, m.run).bind(2, d.rank).bind(3, d.thread).bind(4, own_start).step()) {
        d.bytes = c.col_int(0);
        d.detail = c.col_text(1) + (c.col_text(2).empty() ? "" : " " + c.col_text(2));
        if (c.col_int(3) >= 0) m.call_parts(d, {c.col_int(3), c.col_text(1), c.col_text(2)}, own_start, c.col_int(4));
      }
    }
    return d;
  }
  Stmt s(m.file, "SELECT kind_id, name_id, detail_id, layer_id, op_id, pass_id, device, stream, iteration, bytes "
                 "FROM gpu_activities WHERE id = ?1 AND run_id = ?2");
  Stmt::Use use(s);
  if (!s.bind(1, event.id).bind(2, m.run).step()) return d;
  d.kind = m.name(s.col_int(0));
  d.event.name = m.name(s.col_int(1));
  d.detail = m.name(s.col_int(2));
  d.layer = m.name(s.col_int(3));
  d.launched_by = m.name(s.col_int(4));
  d.pass = m.name(s.col_int(5));
  d.rank = s.col_int(6);
  d.thread = s.col_int(7);
  d.iteration = s.col_int(8);
  d.bytes = s.col_int(9) > 0 ? s.col_int(9) : -1;
  return d;
}

std::vector<TimelineMark> TimelineReader::marks(const std::string& name, bool layer, int64_t limit) {
  auto& m = *impl_;
  std::vector<TimelineMark> out;
  const char* column = layer ? "layer_id" : "name_id";
  auto collect = [&](const std::string& sql, bool gpu) {
    Stmt s(m.file, sql);
    Stmt::Use use(s);
    s.bind(1, m.run).bind(2, name).bind(3, limit);
    while (s.step()) {
      const auto lane = m.lane_of.find({gpu, s.col_int(0), s.col_int(1)});
      if (lane != m.lane_of.end())
        out.push_back(
            {lane->second, m.aligned_lane(lane->second, s.col_int(2)), m.aligned_lane(lane->second, s.col_int(3))});
    }
  };
  collect(fmt::format("SELECT {}, thread, start_ns, end_ns FROM events WHERE run_id = ?1 AND {} = "
                      "(SELECT id FROM strings WHERE value = ?2) LIMIT ?3",
                      m.has_rank ? "rank" : "0", column),
          false);
  if (m.has_gpu)
    collect(fmt::format("SELECT device, stream, start_ns, end_ns FROM gpu_activities WHERE run_id = ?1 AND {} = "
                        "(SELECT id FROM strings WHERE value = ?2) LIMIT ?3",
                        column),
            true);
  std::sort(out.begin(), out.end(), [](const TimelineMark& a, const TimelineMark& b) {
    return std::tie(a.lane, a.start_ns) < std::tie(b.lane, b.start_ns);
  });
  return out;
}

}  // namespace ts::store
