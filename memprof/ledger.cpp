#include "memprof/ledger.h"

#include <algorithm>
#include <stdexcept>

namespace ts::memprof {

namespace {
size_t index_of(vocabulary::Category c) { return static_cast<size_t>(c); }
}  // namespace

Ledger::Ledger() { peak_.t_ns = vocabulary::now_ns(); }

uint32_t Ledger::owner_id(std::string_view owner) {
  if (auto it = owner_ids_.find(owner); it != owner_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(owners_.size());
  owners_.emplace_back(owner);
  owner_ids_.emplace(std::string_view(owners_.back()), id);
  return id;
}

void Ledger::apply(vocabulary::Category category, uint32_t owner, int64_t delta, int64_t t_ns) {
  changes_.push_back({t_ns, delta, owner, category});
  bytes_[index_of(category)] += delta;
  total_ += delta;
  if (total_ > peak_.total) {
    peak_ = {t_ns, bytes_, total_};
    peak_changes_ = changes_.size();
  }
}

uint64_t Ledger::on_alloc(int64_t bytes, vocabulary::Category category, std::string_view owner) {
  if (bytes < 0) throw std::invalid_argument("memprof: negative allocation size " + std::to_string(bytes));
  std::lock_guard lock(mutex_);
  const int64_t t = vocabulary::now_ns();  // read under the lock so the change log stays in time order
  const uint64_t id = (generation_ << kSeqBits) | next_seq_++;
  const uint32_t o = owner_id(owner);
  live_.emplace(id, Live{bytes, o, category});
  auto [it, fresh] = owner_iterations_.try_emplace(uint64_t{o} * vocabulary::kCategoryCount + index_of(category),
                                                   OwnerIteration{iteration_, 0, 0});
  OwnerIteration& oi = it->second;
  if (oi.iteration != iteration_) {
    oi.max_previous = std::max(oi.max_previous, oi.this_iteration);
    oi.this_iteration = 0;
    oi.iteration = iteration_;
  }
  // Outside the iterations (-1: building the model, evaluating) nothing is per iteration.
  if (iteration_ >= 0) oi.this_iteration += bytes;
  apply(category, o, bytes, t);
  return id;
}

void Ledger::on_free(uint64_t id) {
  std::lock_guard lock(mutex_);
  const int64_t t = vocabulary::now_ns();
  const uint64_t generation = id >> kSeqBits;
  if (generation != 0 && generation < generation_) return;  // made before clear(): forgotten
  auto it = live_.find(id);
  if (it == live_.end()) {
    throw std::logic_error("memprof: free of unknown allocation id " + std::to_string(id) + " (double free?)");
  }
  const Live l = it->second;
  live_.erase(it);
  apply(l.category, l.owner, -l.bytes, t);
}

void Ledger::set_iteration(int32_t iteration) {
  std::lock_guard lock(mutex_);
  iteration_ = iteration;
}

int32_t Ledger::iteration() const {
  std::lock_guard lock(mutex_);
  return iteration_;
}

Snapshot Ledger::current() const {
  std::lock_guard lock(mutex_);
  return {vocabulary::now_ns(), bytes_, total_};
}

Snapshot Ledger::peak() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

void Ledger::reset_peak() {
  std::lock_guard lock(mutex_);
  peak_ = {vocabulary::now_ns(), bytes_, total_};
  peak_changes_ = changes_.size();
}

std::vector<Snapshot> Ledger::timeline(size_t max_points) const {
  std::lock_guard lock(mutex_);
  return downsample(changes_.data(), changes_.size(), Bytes{}, max_points);
}

std::vector<Snapshot> Ledger::timeline_since(TimelineCursor& cursor, size_t max_points) const {
  std::vector<Change> fresh;
  {
    // Copy out under the lock (24 bytes a change); the downsampling runs without it, so
    // allocations on the training threads are not held up by a timeline being written.
    std::lock_guard lock(mutex_);
    if (cursor.next_change > changes_.size()) cursor = {};  // clear() since: start again
    fresh.assign(changes_.begin() + static_cast<std::ptrdiff_t>(cursor.next_change), changes_.end());
    cursor.next_change = changes_.size();
  }
  auto out = downsample(fresh.data(), fresh.size(), cursor.bytes, max_points);
  for (const Change& c : fresh) cursor.bytes[index_of(c.category)] += c.delta;
  return out;
}

std::vector<Ledger::OwnedChange> Ledger::changes_since(ChangeCursor& cursor, size_t max_changes) const {
  std::vector<Change> fresh;
  std::vector<std::string> owners;
  {
    // Copy out under the lock (24 bytes a change, and the owners, a few hundred names); the
    // names are attached without it, so the training threads are not held up.
    std::lock_guard lock(mutex_);
    if (cursor.next_change > changes_.size()) cursor = {};  // clear() since: start again
    const size_t n = std::min(max_changes, changes_.size() - cursor.next_change);
    const auto first = changes_.begin() + static_cast<std::ptrdiff_t>(cursor.next_change);
    fresh.assign(first, first + static_cast<std::ptrdiff_t>(n));
    cursor.next_change += n;
    owners.assign(owners_.begin(), owners_.end());
  }
  std::vector<OwnedChange> out;
  out.reserve(fresh.size());
  for (const Change& c : fresh) out.push_back({c.t_ns, c.delta, c.category, owners[c.owner]});
  return out;
}

std::vector<Snapshot> Ledger::downsample(const Change* changes, size_t n, Bytes bytes, size_t max_points) {
  if (n == 0 || max_points == 0) return {};
  int64_t start_total = 0;
  for (const int64_t b : bytes) start_total += b;

  std::vector<size_t> keep;
  if (n <= max_points) {
    keep.resize(n);
    for (size_t i = 0; i < n; ++i) keep[i] = i;
  } else {
    std::vector<int64_t> totals(n);
    int64_t running = start_total;
    size_t peak_index = 0;
    for (size_t i = 0; i < n; ++i) {
      running += changes[i].delta;
      totals[i] = running;
      if (totals[i] > totals[peak_index]) peak_index = i;
    }
    keep = {peak_index, 0, n - 1};  // in priority order
    keep.resize(std::min(keep.size(), max_points));
    const size_t buckets = (max_points - keep.size()) / 2;
    for (size_t b = 0; b < buckets; ++b) {
      const size_t lo = b * n / buckets;
      const size_t hi = (b + 1) * n / buckets;
      if (lo >= hi) continue;
      const auto [mn, mx] = std::minmax_element(totals.begin() + static_cast<std::ptrdiff_t>(lo),
                                                totals.begin() + static_cast<std::ptrdiff_t>(hi));
      keep.push_back(static_cast<size_t>(mn - totals.begin()));
      keep.push_back(static_cast<size_t>(mx - totals.begin()));
    }
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  }

  std::vector<Snapshot> out;
  out.reserve(keep.size());
  int64_t total = start_total;
  size_t next = 0;
  for (size_t i = 0; i < n && next < keep.size(); ++i) {
    bytes[index_of(changes[i].category)] += changes[i].delta;
    total += changes[i].delta;
    if (keep[next] == i) {
      out.push_back({changes[i].t_ns, bytes, total});
      ++next;
    }
  }
  return out;
}

std::vector<Ledger::OwnerBytes> Ledger::per_owner(vocabulary::Category category) const {
  std::lock_guard lock(mutex_);
  std::vector<int64_t> live_at_peak(owners_.size(), 0);
  for (size_t i = 0; i < peak_changes_; ++i) {
    if (changes_[i].category == category) live_at_peak[changes_[i].owner] += changes_[i].delta;
  }
  std::vector<OwnerBytes> out;
  for (const auto& [key, oi] : owner_iterations_) {
    if (key % vocabulary::kCategoryCount != index_of(category)) continue;
    const auto owner = static_cast<uint32_t>(key / vocabulary::kCategoryCount);
    out.push_back({owners_[owner], std::max(oi.max_previous, oi.this_iteration), live_at_peak[owner]});
  }
  std::sort(out.begin(), out.end(), [](const OwnerBytes& a, const OwnerBytes& b) {
    if (a.bytes_allocated_per_iteration != b.bytes_allocated_per_iteration) {
      return a.bytes_allocated_per_iteration > b.bytes_allocated_per_iteration;
    }
    if (a.live_at_peak != b.live_at_peak) return a.live_at_peak > b.live_at_peak;
    return a.owner < b.owner;
  });
  return out;
}

int64_t Ledger::live_count() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(live_.size());
}

size_t Ledger::change_count() const {
  std::lock_guard lock(mutex_);
  return changes_.size();
}

void Ledger::clear() {
  std::lock_guard lock(mutex_);
  ++generation_;
  next_seq_ = 1;
  live_.clear();
  owner_ids_.clear();
  owners_.clear();
  changes_.clear();
  changes_.shrink_to_fit();
  bytes_ = {};
  total_ = 0;
  peak_ = {vocabulary::now_ns(), {}, 0};
  peak_changes_ = 0;
  owner_iterations_.clear();
  iteration_ = -1;
}

}  // namespace ts::memprof
