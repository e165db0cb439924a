#pragma once
// TimelineReader: one run's timeline as the viewer draws it, at any zoom, from a level-of-detail
// index (store/timeline_index.h): the one written at the run's final write, or, for a run without
// one (still running, lost, older files), one built in memory when the reader opens. A window is
// answered with per-bucket summaries at coarse zoom (at most ~2 per pixel per lane and depth)
// plus the events long enough to be drawn alone, and with raw events once few enough are visible.
// The ranks of a distributed run are drawn on rank 0's clock once `align` is given their clocks.
// Not thread-safe: one reader per thread.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/error.h"
#include "vocabulary/clock_alignment.h"

namespace ts::store {

// A row of the timeline: a rank's thread (source "cpu": rank, thread) or a GPU stream (source
// "gpu": rank = device, thread = stream). label: training (the thread with the loop's iterations),
// learner (phases of its own beside it, as A3C's), communication, worker (any other), stream.
struct TimelineLane {
  int lane = 0;
  std::string source, label;
  int64_t rank = 0, thread = 0;
  int depths = 0;  // nesting levels present
  int64_t events = 0;
};

// A bucket's summary of one lane and depth: the events shorter than the bucket that start in it
// (`events`), the time they spend in it (`busy_ns`, cut at the bucket's edges, so it never exceeds
// the bucket's width where events do not overlap), and the name with the most of that time.
struct TimelineTile {
  int lane = 0, depth = 0;
  int64_t start_ns = 0, end_ns = 0, events = 0, busy_ns = 0;
  std::string top_name;
};

// An event drawn alone. `id`: its row in events (cpu) or gpu_activities (gpu).
struct TimelineEvent {
  int lane = 0, depth = 0;
  int64_t start_ns = 0, end_ns = 0, id = 0;
  bool gpu = false;
  std::string name;
};

struct TimelineWindow {
  int64_t from_ns = 0, to_ns = 0;
  int level = -1;                     // the summaries' level; -1: raw events only
  int64_t bucket_ns = 0;              // the summaries' bucket width
  std::vector<TimelineTile> tiles;    // by lane, depth, start
  std::vector<TimelineEvent> events;  // overlapping the window, by lane, depth, start
};

// One rank's part of the collective call a selected comm event belongs to (issue 41): the k-th
// call of (iteration, collective, label) on every rank, as reports/collective_split.h pairs them.
// Times as the reader gives every time (rank 0's clock once aligned); waiting and moving
// (vocabulary/collective_wait.h) only when every rank's clock is known, else -1.
struct TimelineCallPart {
  int64_t rank = 0;
  int lane = -1;  // the lane its call was drawn in (-1: none the index lists)
  int64_t start_ns = 0, end_ns = 0, waiting_ns = -1, moving_ns = -1;
};

// What the viewer shows for a selected event.
struct TimelineEventDetails {
  TimelineEvent event;
  std::string source_label;                                  // "rank 0 · training (thread 0)", "GPU 0 · stream 7"
  std::string layer, kind, pass, detail, launched_by;        // launched_by: a kernel's launching op
  int64_t iteration = -1, rank = 0, thread = 0, bytes = -1;  // bytes -1: not known
  // A collective of a multi-rank run's iteration: every rank's part of the same call, by rank
  // (empty: not one, or some rank has no such call); the last to arrive (-1: clocks unknown).
  std::vector<TimelineCallPart> call;
  int64_t call_last_rank = -1;
};

// Iterations and phases, drawn as bands behind a rank's lanes.
struct TimelineBand {
  int64_t rank = 0, iteration = 0, start_ns = 0, end_ns = 0;
  std::string phase;  // empty: the iteration itself
  bool warmup = false;
};

// Where events with a name or layer lie (a table's row selected): by lane, then start.
struct TimelineMark {
  int lane = 0;
  int64_t start_ns = 0, end_ns = 0;
};

class TimelineReader {
 public:
  // Throws StoreError as Reader does (missing, foreign, newer, corrupt); not_found for no such run.
  TimelineReader(const std::filesystem::path& db, int64_t run);
  ~TimelineReader();
  TimelineReader(TimelineReader&&) noexcept;
  TimelineReader& operator=(TimelineReader&&) noexcept;

  // Sets each rank's CPU lanes on rank 0's clock (issue 41): `clocks` maps a rank to its clock
  // against rank 0's (reports::RankClocks::models(), from the run's rank_clocks rows); a rank not
  // in it keeps its own times, as do the GPU lanes (rank 0's device: a multi-rank run stores
  // rank 0's GPU trace). From then on every time this reader takes or gives (the run's start and
  // end, windows, bands, marks, details) is on rank 0's clock.
  void align(std::map<int64_t, vocabulary::ClockModel> clocks);

  bool index_stored() const;  // false: built in memory on opening
  int64_t start_ns() const;   // the first event's start (0 and 0 when nothing was traced)
  int64_t end_ns() const;     // the last event's end
  int64_t event_count() const;
  const std::vector<TimelineLane>& lanes() const;
  std::vector<TimelineBand> bands();

  // The window [from_ns, to_ns] drawn `pixels` wide.
  TimelineWindow window(int64_t from_ns, int64_t to_ns, int pixels);
  TimelineEventDetails details(const TimelineEvent& event);
  // Events named `name` (an op or kernel) or, with `layer`, owned by that layer; at most `limit`.
  std::vector<TimelineMark> marks(const std::string& name, bool layer, int64_t limit = 2'000'000);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts::store
