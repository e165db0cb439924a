#include "vocabulary/clock_alignment.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ts::vocabulary {

std::optional<ClockOffset> estimate_offset(std::span<const ClockPing> pings) {
  if (pings.empty()) return std::nullopt;
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const ClockPing* fastest = nullptr;
  for (const ClockPing& p : pings) {
    if (p.received_ns < p.sent_ns) return std::nullopt;
    // The peer read its clock at some reference instant in [sent, received].
    lo = std::max(lo, p.peer_ns - p.received_ns);
    hi = std::min(hi, p.peer_ns - p.sent_ns);
    if (fastest == nullptr || p.round_trip_ns() < fastest->round_trip_ns()) fastest = &p;
  }
  ClockOffset o;
  o.pings = static_cast<int>(pings.size());
  o.min_round_trip_ns = fastest->round_trip_ns();
  if (lo > hi) {  // the intervals disagree: the clocks moved against each other between pings
    lo = fastest->peer_ns - fastest->received_ns;
    hi = fastest->peer_ns - fastest->sent_ns;
  }
  o.offset_ns = lo + (hi - lo) / 2;
  o.uncertainty_ns = (hi - lo + 1) / 2;
  o.at_ns = fastest->sent_ns + fastest->round_trip_ns() / 2;
  return o;
}

int64_t ClockModel::to_reference(int64_t peer_ns) const {
  // peer = ref + offset + drift (ref - at)  =>  ref = (peer - offset + drift at) / (1 + drift)
  if (drift == 0) return peer_ns - offset_ns;
  const double ref = (static_cast<double>(peer_ns - offset_ns - at_ns)) / (1.0 + drift);
  return at_ns + static_cast<int64_t>(std::llround(ref));
}

int64_t ClockModel::from_reference(int64_t reference_ns) const {
  const double drifted = drift * static_cast<double>(reference_ns - at_ns);
  return reference_ns + offset_ns + static_cast<int64_t>(std::llround(drifted));
}

ClockModel clock_model(const ClockOffset& start, const std::optional<ClockOffset>& end) {
  ClockModel m;
  m.offset_ns = start.offset_ns;
  m.at_ns = start.at_ns;
  m.uncertainty_ns = start.uncertainty_ns;
  if (end && end->at_ns > start.at_ns) {
    const auto span = static_cast<double>(end->at_ns - start.at_ns);
    m.drift = static_cast<double>(end->offset_ns - start.offset_ns) / span;
    m.drift_uncertainty = static_cast<double>(start.uncertainty_ns + end->uncertainty_ns) / span;
    // Between the two measurements the line's error is within the larger of theirs.
    m.uncertainty_ns = std::max(start.uncertainty_ns, end->uncertainty_ns);
  }
  return m;
}

}  // namespace ts::vocabulary
