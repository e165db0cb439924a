// The link model: fitted to a sweep's all-reduce rows, interpolated where it measured, scaled to
// other rank counts by the ring's terms; nominal from a rate; what the busy thread lost.
#include "projection/link_model.h"

#include <gtest/gtest.h>

#include <stdexcept>

using ts::projection::fit_link_model;
using ts::projection::nominal_link;
using ts::projection::parse_link_rate;

namespace {

// All-reduce rows over 2 ranks of t = 100 us + bytes at 1 GB/s (algbw).
std::vector<ts::store::CollectiveBenchRow> line_rows() {
  std::vector<ts::store::CollectiveBenchRow> rows;
  for (int64_t b : {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 24}) {
    ts::store::CollectiveBenchRow r;
    r.collective = "all_reduce";
    r.ranks = 2;
    r.bytes = b;
    r.time_ns = 100e3 + static_cast<double>(b);
    r.p50_ns = r.time_ns;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

TEST(LinkModel, FitsLatencyAndBandwidthToTheSweep) {
  const auto m = fit_link_model(7, line_rows());
  EXPECT_EQ(m.sweep_run, 7);
  EXPECT_EQ(m.sweep_ranks, 2);
  EXPECT_NEAR(m.latency_ns, 100e3, 1.0);
  EXPECT_NEAR(m.algbw_gbps, 1.0, 1e-6);
  EXPECT_NEAR(m.bus_gbps(), 1.0, 1e-6);  // 2 ranks: bus factor 1
  // Measured sizes are the sweep's own times; between them, interpolated; beyond, the line.
  EXPECT_DOUBLE_EQ(m.all_reduce_ns(1 << 20, 2), 100e3 + (1 << 20));
  EXPECT_NEAR(m.all_reduce_ns(3 << 19, 2), 100e3 + (3 << 19), 1.0);
  EXPECT_NEAR(m.all_reduce_ns(int64_t{1} << 26, 2), 100e3 + (int64_t{1} << 26), 1.0);
  EXPECT_EQ(m.all_reduce_ns(1 << 20, 1), 0);  // one rank exchanges nothing
}

TEST(LinkModel, OtherRankCountsScaleByTheRingsTerms) {
  const auto m = fit_link_model(1, line_rows());
  // 4 ranks: latency x (4-1)/(2-1), bytes x (2*3/4) / (2*1/2).
  const double moving = static_cast<double>(1 << 24);
  EXPECT_NEAR(m.all_reduce_ns(1 << 24, 4), 3 * 100e3 + moving * 1.5, 1.0);
}

TEST(LinkModel, TooFewSizesOrMixedRanksAreRefused) {
  auto rows = line_rows();
  rows.resize(1);
  EXPECT_THROW(fit_link_model(1, rows), std::invalid_argument);
  rows = line_rows();
  rows[1].ranks = 4;
  EXPECT_THROW(fit_link_model(1, rows), std::invalid_argument);
}

TEST(LinkModel, WhatTheBusyThreadLostGivesTheCallsShareOfACore) {
  auto rows = line_rows();
  for (auto& r : rows) {
    r.beside_rate = 0.5;  // one busy thread and the call on one core: each got half
    r.beside_ns = 2 * r.time_ns;
  }
  auto m = fit_link_model(1, rows);
  m.sweep_cores_per_rank = 1;
  EXPECT_NEAR(m.cpu_share(1 << 20), 1.0, 1e-9);  // 1 / (1 + share) = 0.5
  EXPECT_NEAR(m.beside_pace(1 << 20), 0.5, 1e-9);
  m.sweep_cores_per_rank = 0;  // cores unknown: nothing can be said
  EXPECT_EQ(m.cpu_share(1 << 20), 0);
  EXPECT_EQ(fit_link_model(1, line_rows()).cpu_share(1 << 20), 0);  // not measured: nothing taken
}

TEST(LinkModel, NominalLinksAndRates) {
  const auto m = nominal_link(1e9);
  EXPECT_NEAR(m.bus_gbps(), 0.957 / 8, 1e-9);  // one TCP stream's share of 1 Gbit/s, in GB/s
  EXPECT_EQ(m.sweep_run, 0);
  EXPECT_NE(m.source.find("nominal"), std::string::npos);
  EXPECT_THROW(nominal_link(0), std::invalid_argument);
  EXPECT_DOUBLE_EQ(*parse_link_rate("1gbit"), 1e9);
  EXPECT_DOUBLE_EQ(*parse_link_rate("100mbit"), 1e8);
  EXPECT_DOUBLE_EQ(*parse_link_rate("2.5Gbit"), 2.5e9);
  EXPECT_DOUBLE_EQ(*parse_link_rate("125mbps"), 1e9);
  for (const char* bad : {"", "fast", "1g", "-1gbit", "0gbit", "1gbitx"}) EXPECT_FALSE(parse_link_rate(bad)) << bad;
}
