#pragma once
// The memory ledger: every allocation and free with its category and owner (layer path).
// Allocators report here; the ledger keeps live bytes per category, the peak of the total with
// its split, a change log for timelines, and per-owner bytes. Thread-safe (one mutex: the
// allocation rate is thousands per second, not millions).
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vocabulary/clock.h"
#include "vocabulary/memory_category.h"

namespace ts::memprof {

using Bytes = std::array<int64_t, vocabulary::kCategoryCount>;  // indexed by static_cast<size_t>(vocabulary::Category)

struct Snapshot {
  int64_t t_ns = 0;
  Bytes bytes{};
  int64_t total = 0;
};

class Ledger {
 public:
  Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  static Ledger& global() {
    static Ledger ledger;
    return ledger;
  }

  // Returns the allocation's id (never 0). bytes < 0: std::invalid_argument.
  uint64_t on_alloc(int64_t bytes, vocabulary::Category category, std::string_view owner);
  // Unknown id: std::logic_error (a double free is a bug). An id from before clear(): ignored.
  void on_free(uint64_t id);

  // Allocations are attributed to the current iteration (for per_owner); -1 (the default):
  // outside the training iterations, counted in no iteration.
  void set_iteration(int32_t iteration);
  int32_t iteration() const;

  Snapshot current() const;  // t_ns = now
  // Highest TOTAL live bytes since construction, clear() or reset_peak(), with its split
  // and the time of the change that reached it.
  Snapshot peak() const;
  void reset_peak();  // the peak becomes the current state

  // Live bytes per category after each change since clear(), downsampled to at most
  // max_points: the first and last changes and the highest total are always kept, and the
  // rest is, per time bucket, its lowest and highest point (so saw-teeth stay visible).
  std::vector<Snapshot> timeline(size_t max_points) const;
  // The same for a timeline written while the run goes on: the changes since `cursor`
  // (downsampled alike, continuing from the cursor's live bytes); advances the cursor.
  struct TimelineCursor {
    size_t next_change = 0;
    Bytes bytes{};
  };
  std::vector<Snapshot> timeline_since(TimelineCursor& cursor, size_t max_points) const;

  // The change log itself, owners named, for storing it: the changes since `cursor` in the
  // order they were made, at most max_changes of them (so a caller can write a long log in
  // pieces); advances the cursor past what it returns. After clear() a cursor starts again.
  struct OwnedChange {
    int64_t t_ns = 0;
    int64_t delta = 0;  // bytes: > 0 an allocation, < 0 a free
    vocabulary::Category category = vocabulary::Category::other;
    std::string owner;  // the layer path the allocation was made under ("" for none)
  };
  struct ChangeCursor {
    size_t next_change = 0;
  };
  std::vector<OwnedChange> changes_since(ChangeCursor& cursor, size_t max_changes = SIZE_MAX) const;

  struct OwnerBytes {
    std::string owner;
    int64_t bytes_allocated_per_iteration = 0;  // max over iterations of bytes allocated in one
    int64_t live_at_peak = 0;                   // bytes of this owner and category live at peak()
  };
  // Owners with allocations in that category, by bytes_allocated_per_iteration descending.
  std::vector<OwnerBytes> per_owner(vocabulary::Category category) const;

  int64_t live_count() const;
  size_t change_count() const;

  // Forgets everything (the iteration is -1 again); frees of allocations made before are
  // ignored afterwards.
  void clear();

 private:
  struct Live {
    int64_t bytes;
    uint32_t owner;
    vocabulary::Category category;
  };
  struct Change {  // 24 bytes
    int64_t t_ns;
    int64_t delta;
    uint32_t owner;
    vocabulary::Category category;
  };
  struct OwnerIteration {
    int32_t iteration;
    int64_t this_iteration;
    int64_t max_previous;
  };
  static constexpr int kSeqBits = 40;  // id = generation << 40 | sequence

  void apply(vocabulary::Category category, uint32_t owner, int64_t delta, int64_t t_ns);
  // Live bytes after each of changes[0, n), starting from `bytes`, downsampled to max_points.
  static std::vector<Snapshot> downsample(const Change* changes, size_t n, Bytes bytes, size_t max_points);
  uint32_t owner_id(std::string_view owner);

  mutable std::mutex mutex_;
  uint64_t generation_ = 1;
  uint64_t next_seq_ = 1;
  int32_t iteration_ = -1;
  std::unordered_map<uint64_t, Live> live_;
  std::deque<std::string> owners_;  // deque: the map's views stay valid
  std::unordered_map<std::string_view, uint32_t> owner_ids_;
  std::vector<Change> changes_;
  Bytes bytes_{};
  int64_t total_ = 0;
  Snapshot peak_;
  size_t peak_changes_ = 0;  // changes_ prefix applied at the peak (replayed by per_owner)
  std::unordered_map<uint64_t, OwnerIteration> owner_iterations_;  // key: owner * vocabulary::kCategoryCount + category
};

}  // namespace ts::memprof
