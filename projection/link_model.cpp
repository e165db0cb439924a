#include "projection/link_model.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "vocabulary/bus_factor.h"

namespace ts::projection {

namespace {

// Sizes below this are mostly latency and the shaper's burst: the line is fitted above it.
constexpr int64_t kFitFromBytes = 64 * 1024;
// One TCP stream's goodput over a tbf-shaped link, as a share of the configured rate (measured:
// 0.957 Gbit/s at 1gbit and 9.57 at 10gbit, docs/netns-hosts.md).
constexpr double kTcpShareOfRate = 0.957;
// A nominal link's latency per all-reduce step: a TCP round trip and MPI's handshakes.
constexpr double kNominalLatencyNs = 100e3;

// Weighted least squares of t = a + b x with weights 1/t^2 (relative error).
std::pair<double, double> fit_line(const std::vector<std::pair<int64_t, double>>& points) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    const double w = 1.0 / (y * y);
    const double xd = static_cast<double>(x);
    sw += w;
    sx += w * xd;
    sy += w * y;
    sxx += w * xd * xd;
    sxy += w * xd * y;
  }
  const double det = sw * sxx - sx * sx;
  if (!(det > 0)) throw std::invalid_argument("the sweep's sizes do not determine a line");
  const double b = (sw * sxy - sx * sy) / det;
  const double a = (sy - b * sx) / sw;
  return {a, b};
}

double row_time(const store::CollectiveBenchRow& r) { return r.p50_ns > 0 ? r.p50_ns : r.time_ns; }

}  // namespace

double LinkModel::bus_gbps() const { return algbw_gbps * vocabulary::bus_factor("all_reduce", sweep_ranks); }

double LinkModel::all_reduce_ns(int64_t bytes, int64_t ranks) const {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double line = latency_ns + static_cast<double>(bytes) / algbw_gbps;
  double at_sweep = line;
  const auto& t = all_reduce_table;
  if (t.size() >= 2 && bytes >= t.front().first && bytes <= t.back().first) {
    const auto hi = std::lower_bound(t.begin(), t.end(), bytes,
                                     [](const std::pair<int64_t, double>& p, int64_t b) { return p.first < b; });
    if (hi->first == bytes) {
      at_sweep = hi->second;
    } else {
      const auto lo = hi - 1;
      const double f = static_cast<double>(bytes - lo->first) / static_cast<double>(hi->first - lo->first);
      at_sweep = lo->second + f * (hi->second - lo->second);
    }
  } else if (!t.empty() && bytes < t.front().first) {
    at_sweep = std::min(line, t.front().second);  // no slower than the smallest size measured
  }
  if (ranks == sweep_ranks) return at_sweep;
  // The ring's terms: 2(n-1) steps of latency, bytes x 2(n-1)/n on each rank's link.
  const double steps = static_cast<double>(ranks - 1) / static_cast<double>(std::max<int64_t>(1, sweep_ranks - 1));
  const double volume = vocabulary::bus_factor("all_reduce", ranks) /
                        vocabulary::bus_factor("all_reduce", std::max<int64_t>(2, sweep_ranks));
  const double moving = std::max(0.0, at_sweep - latency_ns);
  return latency_ns * steps + moving * volume;
}

namespace {

// Linear interpolation in a (bytes, value) table sorted by bytes; the nearest value outside it.
double interpolate(const std::vector<std::pair<int64_t, double>>& t, int64_t bytes, double none) {
  if (t.empty()) return none;
  if (bytes <= t.front().first) return t.front().second;
  if (bytes >= t.back().first) return t.back().second;
  const auto hi = std::lower_bound(t.begin(), t.end(), bytes,
                                   [](const std::pair<int64_t, double>& p, int64_t b) { return p.first < b; });
  const auto lo = hi - 1;
  const double f = static_cast<double>(bytes - lo->first) / static_cast<double>(hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

}  // namespace

double LinkModel::beside_rate(int64_t bytes) const { return interpolate(beside_rate_table, bytes, 1.0); }
double LinkModel::beside_pace(int64_t bytes) const { return interpolate(beside_pace_table, bytes, 1.0); }

double LinkModel::cpu_share(int64_t bytes) const {
  const double rate = beside_rate(bytes);
  if (!(rate < 1) || !(sweep_cores_per_rank > 0)) return 0;
  return std::clamp(sweep_cores_per_rank / rate - 1.0, 0.0, 1.0);
}

double LinkModel::p2p_ns(int64_t bytes) const {
  if (bytes <= 0) return 0;
  return p2p_latency_ns + static_cast<double>(bytes) / p2p_gbps;
}

LinkModel fit_link_model(int64_t sweep_run, const std::vector<store::CollectiveBenchRow>& rows) {
  std::vector<std::pair<int64_t, double>> table, fit, beside, pace;
  int64_t ranks = 0;
  for (const auto& r : rows) {
    if (r.bytes <= 0 || !(row_time(r) > 0)) continue;
    if (r.collective == "all_reduce") {
      if (ranks != 0 && r.ranks != ranks) throw std::invalid_argument("the sweep mixes rank counts");
      ranks = r.ranks;
      table.emplace_back(r.bytes, row_time(r));
      if (r.beside_rate > 0) beside.emplace_back(r.bytes, std::min(1.0, r.beside_rate));
      if (r.beside_ns > 0) pace.emplace_back(r.bytes, std::min(1.0, row_time(r) / r.beside_ns));
      if (r.bytes >= kFitFromBytes) fit.emplace_back(r.bytes, row_time(r));
    }
  }
  if (fit.size() < 2) {
    throw std::invalid_argument(fmt::format(
        "collectives run {} has {} all-reduce sizes of 64 KiB or more; the link model needs two (bench collectives "
        "--collectives all_reduce --min-bytes 64K ...)",
        sweep_run, fit.size()));
  }
  std::sort(table.begin(), table.end());
  LinkModel m;
  m.sweep_run = sweep_run;
  m.sweep_ranks = ranks;
  const auto [a, b] = fit_line(fit);
  m.latency_ns = std::max(0.0, a);
  m.algbw_gbps = b > 0 ? 1.0 / b : static_cast<double>(fit.back().first) / fit.back().second;
  m.all_reduce_table = std::move(table);
  std::sort(beside.begin(), beside.end());
  m.beside_rate_table = std::move(beside);
  std::sort(pace.begin(), pace.end());
  m.beside_pace_table = std::move(pace);
  // A parameter server's pushes and answers cross the link both ways at once, as an all-reduce's
  // halves do: its bus bandwidth is what each direction carries then.
  m.p2p_latency_ns = m.latency_ns / 2;
  m.p2p_gbps = m.bus_gbps();
  m.source = fmt::format(
      "sweep run {} (all_reduce over {} ranks, {} sizes: {:.0f} us + bytes at {:.3f} GB/s busbw{})", sweep_run, ranks,
      m.all_reduce_table.size(), m.latency_ns / 1e3, m.bus_gbps(),
      m.beside_rate_table.empty()
          ? "; what it takes from compute not measured"
          : fmt::format("; compute beside it kept {:.0f}% of its rate at 16 MiB", 100 * m.beside_rate(16 << 20)));
  return m;
}

LinkModel load_link_model(store::Reader& reader, int64_t sweep_run) {
  const auto run = reader.run(sweep_run);
  if (!run || run->workload != "collectives")
    throw std::invalid_argument(
        fmt::format("run {} is no collectives benchmark (trainscope bench collectives)", sweep_run));
  LinkModel m = fit_link_model(sweep_run, reader.collective_bench(sweep_run));
  double cores = 0, per_machine = 0;
  for (const auto& e : reader.environment(sweep_run)) {
    if (e.key == "cpu.logical_cores") cores = std::atof(e.value.c_str());
    if (e.key == "ranks_per_machine") per_machine = std::atof(e.value.c_str());
  }
  if (cores > 0 && per_machine > 0) m.sweep_cores_per_rank = cores / per_machine;
  return m;
}

LinkModel nominal_link(double bits_per_s) {
  if (!(bits_per_s > 0)) throw std::invalid_argument("a link rate must be positive");
  LinkModel m;
  m.sweep_ranks = 2;
  const double bytes_per_ns = bits_per_s * kTcpShareOfRate / 8.0 / 1e9;
  m.latency_ns = kNominalLatencyNs;
  // Two ranks: busbw = algbw x 1, and busbw is what one direction of the link carries.
  m.algbw_gbps = bytes_per_ns;
  m.p2p_latency_ns = kNominalLatencyNs / 2;
  m.p2p_gbps = bytes_per_ns;
  m.source = fmt::format("nominal {:.3g} Gbit/s ({:.0f}% of it for one TCP stream, {:.0f} us latency; no sweep)",
                         bits_per_s / 1e9, kTcpShareOfRate * 100, kNominalLatencyNs / 1e3);
  return m;
}

std::optional<double> parse_link_rate(std::string_view text) {
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin || !(value > 0)) return std::nullopt;
  std::string unit(ptr, end);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 1;
  if (!unit.empty() && (unit[0] == 'k' || unit[0] == 'm' || unit[0] == 'g' || unit[0] == 't')) {
    scale = unit[0] == 'k' ? 1e3 : unit[0] == 'm' ? 1e6 : unit[0] == 'g' ? 1e9 : 1e12;
    unit.erase(0, 1);
  }
  if (unit == "bit") return value * scale;
  if (unit == "bps") return value * scale * 8;
  return std::nullopt;
}

}  // namespace ts::projection
