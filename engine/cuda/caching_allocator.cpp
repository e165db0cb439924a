#include "engine/cuda/caching_allocator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "memprof/ledger.h"

namespace ts::engine::cuda {

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

CachingAllocator::CachingAllocator(std::string device_label, RawAlloc alloc, RawFree free, DeviceInfo info)
    : label_(std::move(device_label)),
      raw_alloc_(std::move(alloc)),
      raw_free_(std::move(free)),
      info_(std::move(info)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    release_cache_locked();
  } catch (...) {
    // Teardown: the device may already be gone; the driver reclaims the memory anyway.
  }
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes == 0) return 0;
  if (bytes <= kSmallLimit) return (bytes + kSmallRound - 1) / kSmallRound * kSmallRound;
  return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

void* CachingAllocator::take_cached(size_t rounded, StreamKey stream) {
  auto pool = cached_.find(stream);
  if (pool == cached_.end()) return nullptr;
  auto it = pool->second.lower_bound(rounded);  // smallest block >= rounded
  if (it == pool->second.end() || !fits(it->first, rounded)) return nullptr;
  void* p = it->second;
  live_.emplace(p, Block{it->first, stream});
  stats_.used_bytes += static_cast<int64_t>(it->first);
  pool->second.erase(it);
  return p;
}

void* CachingAllocator::allocate(size_t bytes, StreamKey stream, vocabulary::Category category,
                                 std::string_view owner) {
  if (bytes == 0) return nullptr;
  const size_t rounded = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  void* p = take_cached(rounded, stream);
  if (p) {
    ++stats_.cache_hits;
  } else {
    p = raw_alloc_(rounded);
    if (!p) {
      // Cached blocks of every stream may be what stands in the way: give them back, try once more.
      ++stats_.oom_retries;
      release_cache_locked();
      p = raw_alloc_(rounded);
      if (!p) throw OutOfMemoryError(oom_message(bytes, rounded, category, owner));
    }
    ++stats_.device_mallocs;
    stats_.reserved_bytes += static_cast<int64_t>(rounded);
    stats_.used_bytes += static_cast<int64_t>(rounded);
    live_.emplace(p, Block{rounded, stream});
  }
  requested_[p] = bytes;
  stats_.requested_bytes += static_cast<int64_t>(bytes);
  update_peaks();
  return p;
}

void CachingAllocator::free(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(p);
  if (it == live_.end()) throw std::logic_error("CachingAllocator(" + label_ + "): free of an unknown pointer");
  const Block b = it->second;
  live_.erase(it);
  auto r = requested_.find(p);
  if (r != requested_.end()) {
    stats_.requested_bytes -= static_cast<int64_t>(r->second);
    requested_.erase(r);
  }
  stats_.used_bytes -= static_cast<int64_t>(b.size);
  cached_[b.stream].emplace(b.size, p);
}

void CachingAllocator::release_cache_locked() {
  for (auto& [stream, pool] : cached_) {
    for (auto& [size, p] : pool) {
      raw_free_(p);
      ++stats_.device_frees;
      stats_.reserved_bytes -= static_cast<int64_t>(size);
    }
  }
  cached_.clear();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cache_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

int64_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.reserved_bytes - stats_.used_bytes;
}

void CachingAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
  stats_.peak_used_bytes = stats_.used_bytes;
}

void CachingAllocator::update_peaks() {
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  stats_.peak_used_bytes = std::max(stats_.peak_used_bytes, stats_.used_bytes);
}

std::string CachingAllocator::oom_message(size_t bytes, size_t rounded, vocabulary::Category category,
                                          std::string_view owner) const {
  std::ostringstream o;
  o << "out of memory on " << label_ << ": cannot allocate " << format_bytes(static_cast<int64_t>(bytes)) << " ("
    << bytes << " bytes, block " << rounded << ") for category " << vocabulary::to_string(category) << ", owner '"
    << (owner.empty() ? std::string_view("(top level)") : owner) << "'. Live tensors by category:";
  const memprof::Snapshot now = memprof::Ledger::global().current();
  bool any = false;
  for (vocabulary::Category c : vocabulary::kAllCategories) {
    const int64_t b = now.bytes[static_cast<size_t>(c)];
    if (b == 0) continue;
    o << ' ' << vocabulary::to_string(c) << ' ' << format_bytes(b) << ',';
    any = true;
  }
  if (!any) o << " none,";
  o << " total " << format_bytes(now.total) << " (all devices). Allocator: reserved "
    << format_bytes(stats_.reserved_bytes) << ", used " << format_bytes(stats_.used_bytes)
    << " (the cache was emptied and the allocation retried once)";
  if (info_) o << "; " << info_();
  return o.str();
}

}  // namespace ts::engine::cuda
