// What a rank sends rank 0 (session/rank_records.h): every vector survives the round trip, the
// parameter-server rows, a worker's pull and push waits and its GPU breakdown included; stamp_rank
// marks the rows with the sender's rank but leaves the ps rows' own; a malformed message throws.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "session/rank_records.h"

using nlohmann::json;
using ts::session::RankPayload;
namespace store = ts::store;

namespace {

// A worker's last message with a row in every vector; the ps rows' ranks are not the sender's.
RankPayload final_payload() {
  RankPayload p;
  p.rank = 2;
  p.final = true;
  p.error = "";
  p.flush.iterations.push_back({5, false, 100, 200, 8, 0.25});
  p.flush.phases.push_back({5, "forward", 100, 150});
  p.flush.events.push_back({100, 120, "gemm", "fc", "op", "forward", 5, 1});
  p.flush.memory.push_back({110, "activations", 4096});
  p.flush.samples.push_back({130, "rss", 1.5e6});
  store::CollectiveRow c;
  c.iteration = 5;
  c.thread = 1;
  c.collective = "barrier";
  c.bytes = 0;
  c.start_ns = 190;
  c.end_ns = 195;
  p.flush.collectives.push_back(c);

  store::RankBreakdownRow b;
  b.iteration = 5;
  b.start_ns = 100;
  b.end_ns = 200;
  b.compute_ns = 60;
  b.comm_ns = 30;
  b.overlap_ns = 5;
  b.exposed_comm_ns = 25;
  b.idle_ns = 15;
  b.backward_wait_ns = 3;
  b.pull_wait_ns = 17;
  b.push_wait_ns = 9;
  p.breakdown.push_back(b);
  store::CommOpRow o;
  o.backend = "mpi";
  o.collective = "all_reduce";
  o.bytes = 1024;
  o.ranks = 4;
  o.count = 2;
  o.total_ns = 40;
  o.mean_ns = 20;
  o.min_ns = 19;
  o.max_ns = 21;
  o.algbw_gbps = 51.2;
  o.busbw_gbps = 76.8;
  p.comm_ops.push_back(o);
  p.metrics.push_back({"throughput", 123.5, "samples/s", -1});
  p.memory_peak.push_back({"weights", 65536, 10});
  p.memory_changes.push_back({10, "weights", "fc.weight", 65536});

  p.ps_staleness.push_back({2, 5, "updates", 0, 11});
  p.ps_staleness.push_back({2, 5, "updates", 3, 2});
  p.ps_staleness.push_back({7, 4, "clock_gap", 1, 6});  // counted by a server on this rank, for worker 7
  store::PsServerRow s;
  s.server = 1;
  s.rank = 0;  // hosted by rank 0, reported by rank 2
  s.keys = 12;
  s.bytes_held = 1 << 20;
  s.bytes_in = 3 << 20;
  s.bytes_out = 5 << 20;
  s.pushes = 30;
  s.pulls = 31;
  s.updates = 29;
  s.busy_ns = 7'000'000;
  s.queue_max = 4;
  s.queue_mean = 1.25;
  p.ps_servers.push_back(s);

  // Its GPU's time in two timed iterations on two devices (ranks sharing a host's GPUs).
  store::GpuBreakdownRow g;
  g.device = 1;
  g.iteration = 5;
  g.start_ns = 1'000;
  g.end_ns = 9'000'000'000;  // past 32 bits
  g.compute_ns = 600;
  g.comm_ns = 300;
  g.memcpy_ns = 40;
  g.memset_ns = 4;
  g.overlap_ns = 120;
  g.exposed_comm_ns = 180;
  g.busy_ns = 820;
  g.idle_ns = 8'999'998'180;
  p.gpu_breakdown.push_back(g);
  g.device = 0;
  g.iteration = 6;
  g.compute_ns = 7;
  p.gpu_breakdown.push_back(g);
  return p;
}

// The message as JSON, to make it malformed in one place and encode it again.
json as_json(const RankPayload& p) { return json::from_cbor(ts::session::to_bytes(p)); }
std::vector<uint8_t> encoded(const json& j) { return json::to_cbor(j); }

void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& what) {
  try {
    (void)ts::session::from_bytes(bytes);
    ADD_FAILURE() << what << ": parsed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("did not parse"), std::string::npos) << what << ": " << e.what();
  }
}

}  // namespace

TEST(RankRecords, FinalPayloadRoundTripsPsRowsAndBreakdownWaits) {
  const RankPayload in = final_payload();
  const RankPayload out = ts::session::from_bytes(ts::session::to_bytes(in));
  EXPECT_EQ(out.rank, 2);
  EXPECT_TRUE(out.final);
  ASSERT_EQ(out.breakdown.size(), 1u);
  const auto& b = out.breakdown[0];
  EXPECT_EQ(b.iteration, 5);
  EXPECT_EQ(b.start_ns, 100);
  EXPECT_EQ(b.end_ns, 200);
  EXPECT_EQ(b.compute_ns, 60);
  EXPECT_EQ(b.comm_ns, 30);
  EXPECT_EQ(b.overlap_ns, 5);
  EXPECT_EQ(b.exposed_comm_ns, 25);
  EXPECT_EQ(b.idle_ns, 15);
  EXPECT_EQ(b.backward_wait_ns, 3);
  EXPECT_EQ(b.pull_wait_ns, 17);
  EXPECT_EQ(b.push_wait_ns, 9);

  ASSERT_EQ(out.ps_staleness.size(), in.ps_staleness.size());
  for (size_t i = 0; i < in.ps_staleness.size(); ++i) {
    const auto &x = in.ps_staleness[i], &y = out.ps_staleness[i];
    EXPECT_EQ(y.rank, x.rank) << i;
    EXPECT_EQ(y.iteration, x.iteration) << i;
    EXPECT_EQ(y.kind, x.kind) << i;
    EXPECT_EQ(y.staleness, x.staleness) << i;
    EXPECT_EQ(y.count, x.count) << i;
  }
  ASSERT_EQ(out.ps_servers.size(), 1u);
  const auto &s = out.ps_servers[0], &t = in.ps_servers[0];
  EXPECT_EQ(s.server, t.server);
  EXPECT_EQ(s.rank, t.rank);
  EXPECT_EQ(s.keys, t.keys);
  EXPECT_EQ(s.bytes_held, t.bytes_held);
  EXPECT_EQ(s.bytes_in, t.bytes_in);
  EXPECT_EQ(s.bytes_out, t.bytes_out);
  EXPECT_EQ(s.pushes, t.pushes);
  EXPECT_EQ(s.pulls, t.pulls);
  EXPECT_EQ(s.updates, t.updates);
  EXPECT_EQ(s.busy_ns, t.busy_ns);
  EXPECT_EQ(s.queue_max, t.queue_max);
  EXPECT_DOUBLE_EQ(s.queue_mean, 1.25);

  // The vectors before them still arrive whole.
  EXPECT_EQ(out.flush.iterations.size(), 1u);
  EXPECT_EQ(out.flush.events.at(0).name, "gemm");
  EXPECT_EQ(out.flush.collectives.at(0).end_ns, 195);
  EXPECT_DOUBLE_EQ(out.comm_ops.at(0).busbw_gbps, 76.8);
  EXPECT_EQ(out.metrics.at(0).unit, "samples/s");
  EXPECT_EQ(out.memory_peak.at(0).bytes, 65536);
  EXPECT_EQ(out.memory_changes.at(0).owner, "fc.weight");
}

TEST(RankRecords, FinalPayloadRoundTripsTheGpuBreakdown) {
  const RankPayload in = final_payload();
  const RankPayload out = ts::session::from_bytes(ts::session::to_bytes(in));
  ASSERT_EQ(out.gpu_breakdown.size(), 2u);
  for (size_t i = 0; i < in.gpu_breakdown.size(); ++i) {
    const auto &x = in.gpu_breakdown[i], &y = out.gpu_breakdown[i];
    EXPECT_EQ(y.device, x.device) << i;
    EXPECT_EQ(y.iteration, x.iteration) << i;
    EXPECT_EQ(y.start_ns, x.start_ns) << i;
    EXPECT_EQ(y.end_ns, x.end_ns) << i;
    EXPECT_EQ(y.compute_ns, x.compute_ns) << i;
    EXPECT_EQ(y.comm_ns, x.comm_ns) << i;
    EXPECT_EQ(y.memcpy_ns, x.memcpy_ns) << i;
    EXPECT_EQ(y.memset_ns, x.memset_ns) << i;
    EXPECT_EQ(y.overlap_ns, x.overlap_ns) << i;
    EXPECT_EQ(y.exposed_comm_ns, x.exposed_comm_ns) << i;
    EXPECT_EQ(y.busy_ns, x.busy_ns) << i;
    EXPECT_EQ(y.idle_ns, x.idle_ns) << i;
    EXPECT_EQ(y.rank, 0) << i;  // not sent: rank 0 stamps the sender's
  }
  EXPECT_EQ(out.gpu_breakdown[1].compute_ns, 7);
  EXPECT_EQ(out.gpu_breakdown[0].end_ns, 9'000'000'000);
}

TEST(RankRecords, AStreamedPayloadHasNoPsRows) {
  RankPayload in;
  in.rank = 1;
  in.flush.iterations.push_back({0, true, 0, 10, 8, 1.0});
  const RankPayload out = ts::session::from_bytes(ts::session::to_bytes(in));
  EXPECT_FALSE(out.final);
  EXPECT_TRUE(out.ps_staleness.empty());
  EXPECT_TRUE(out.ps_servers.empty());
  EXPECT_TRUE(out.breakdown.empty());
  EXPECT_TRUE(out.gpu_breakdown.empty());
  EXPECT_EQ(out.flush.iterations.size(), 1u);
}

TEST(RankRecords, StampRankMarksTheSendersRowsButKeepsThePsRowsRanks) {
  RankPayload p = ts::session::from_bytes(ts::session::to_bytes(final_payload()));
  ts::session::stamp_rank(p);
  EXPECT_EQ(p.flush.iterations.at(0).rank, 2);
  EXPECT_EQ(p.flush.events.at(0).rank, 2);
  EXPECT_EQ(p.flush.collectives.at(0).rank, 2);
  EXPECT_EQ(p.breakdown.at(0).rank, 2);
  EXPECT_EQ(p.comm_ops.at(0).rank, 2);
  EXPECT_EQ(p.memory_changes.at(0).rank, 2);
  EXPECT_EQ(p.gpu_breakdown.at(0).rank, 2);
  EXPECT_EQ(p.gpu_breakdown.at(1).rank, 2);
  EXPECT_EQ(p.gpu_breakdown.at(1).device, 0);     // stamping touches the rank only
  EXPECT_EQ(p.breakdown.at(0).pull_wait_ns, 17);  // stamping touches the rank only
  // Which worker a histogram counts and which rank hosts a shard are the producer's.
  EXPECT_EQ(p.ps_staleness.at(0).rank, 2);
  EXPECT_EQ(p.ps_staleness.at(2).rank, 7);
  EXPECT_EQ(p.ps_servers.at(0).rank, 0);
}

TEST(RankRecords, MalformedPayloadsThrow) {
  expect_rejected({}, "empty");
  expect_rejected({0xff, 0x00, 0x13}, "not CBOR");
  std::vector<uint8_t> truncated = ts::session::to_bytes(final_payload());
  truncated.resize(truncated.size() / 2);
  expect_rejected(truncated, "truncated");

  json j = as_json(final_payload());
  j.erase("pst");
  expect_rejected(encoded(j), "no staleness rows");
  j = as_json(final_payload());
  j.erase("pss");
  expect_rejected(encoded(j), "no server rows");
  j = as_json(final_payload());
  j["pst"][0].erase(4);  // a row without its count
  expect_rejected(encoded(j), "short staleness row");
  j = as_json(final_payload());
  j["pst"][1][2] = 3;  // kind is text
  expect_rejected(encoded(j), "numeric kind");
  j = as_json(final_payload());
  j["pss"][0][0] = "one";  // server is a number
  expect_rejected(encoded(j), "text server");
  j = as_json(final_payload());
  j["pss"][0].erase(11);  // no queue_mean
  expect_rejected(encoded(j), "short server row");
  j = as_json(final_payload());
  j["pss"] = json::object();  // not rows
  j["pss"]["x"] = 1;
  expect_rejected(encoded(j), "servers not an array of rows");
  j = as_json(final_payload());
  j["bd"][0].erase(10);  // a breakdown row of the format before the waits
  expect_rejected(encoded(j), "breakdown without push_wait_ns");
  j = as_json(final_payload());
  j["bd"][0][9] = "17";  // pull_wait_ns as text
  expect_rejected(encoded(j), "text pull wait");
  j = as_json(final_payload());
  j.erase("gb");  // a message of the format before the GPU rows
  expect_rejected(encoded(j), "no GPU breakdown");
  j = as_json(final_payload());
  j["gb"][1].erase(11);  // a row without its idle time
  expect_rejected(encoded(j), "short GPU row");
  j = as_json(final_payload());
  j["gb"][0][4] = "600";  // compute_ns as text
  expect_rejected(encoded(j), "text compute");
  j = as_json(final_payload());
  j["gb"] = 3;  // not rows
  expect_rejected(encoded(j), "GPU rows not an array");
}
