#pragma once
// How one clock maps onto another (issue 41): ranks on different hosts read steady clocks with
// different epochs (each host's boot), so their timestamps mean nothing to each other until the
// offset between the clocks is measured. The reference (rank 0) pings a peer (Cristian's method,
// as NTP does it): it notes its clock before asking (`sent`) and after the answer arrives
// (`received`); the peer answers with its own clock (`peer`), read in between. The true offset
// (peer clock minus reference clock at the same instant) then lies in [peer - received,
// peer - sent]; over many pings the intersection of those intervals bounds it, and half its
// width is the uncertainty: a bound, not a statistic. Measured at a run's start and end, the two
// offsets give the drift between the clocks, and a line maps the peer's times onto the
// reference's (`ClockModel::to_reference`). Pure arithmetic: the exchange is
// distributed/clock_sync.h's, the stored rows store/'s, and every reader that sets two ranks'
// times side by side maps them with this.
#include <cstdint>
#include <optional>
#include <span>

namespace ts::vocabulary {

// One ping: rank 0's clock when it sent and when the answer arrived; the peer's clock when it answered.
struct ClockPing {
  int64_t sent_ns = 0, peer_ns = 0, received_ns = 0;
  int64_t round_trip_ns() const { return received_ns - sent_ns; }
};

// The offset of a peer's clock (peer minus reference at the same instant) at reference time `at_ns`.
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;  // the true offset is within offset_ns +- this
  int64_t at_ns = 0;           // the reference clock's time of the measurement (its middle)
  int64_t min_round_trip_ns = 0;
  int pings = 0;
};

// The offset the pings bound: the middle of the intersection of their intervals; where the
// intersection is empty (a clock that moved between pings, or a stepped one), the middle of the
// fastest ping's own interval. std::nullopt without pings, or when a ping's answer came before
// its question (a bad sample: received < sent).
std::optional<ClockOffset> estimate_offset(std::span<const ClockPing> pings);

// A peer's clock against the reference over a run: the offset at the start, the drift (the
// offset's change per reference nanosecond, from the start and end measurements; 0 with one),
// the larger of the two uncertainties.
struct ClockModel {
  int64_t offset_ns = 0;  // at reference time at_ns
  int64_t at_ns = 0;
  double drift = 0;  // d(offset)/d(reference time): 1e-6 is 1 ppm
  // The bound on the drift: the two offsets' uncertainties over the time between them (a short
  // run's drift is mostly this). The mapped times stay within uncertainty_ns between the two
  // measurements whatever the drift's error.
  double drift_uncertainty = 0;
  int64_t uncertainty_ns = 0;
  // The reference clock's time when the peer's clock read `peer_ns`.
  int64_t to_reference(int64_t peer_ns) const;
  // The peer's clock when the reference's read `reference_ns` (to_reference's inverse).
  int64_t from_reference(int64_t reference_ns) const;
};
ClockModel clock_model(const ClockOffset& start, const std::optional<ClockOffset>& end = std::nullopt);

}  // namespace ts::vocabulary
