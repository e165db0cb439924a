#include "session/rank_records.h"

#include <stdexcept>

#include "nlohmann/json.hpp"

namespace ts::session {

namespace {

using nlohmann::json;

// Each row as an array in a fixed field order: smaller than objects, and the order is the format.
json flush_json(const store::RunFlush& f) {
  json j = json::object();
  json a = json::array();
  for (const auto& r : f.iterations) a.push_back({r.index, r.warmup, r.start_ns, r.end_ns, r.samples, r.loss});
  j["it"] = std::move(a);
  a = json::array();
  for (const auto& r : f.phases) a.push_back({r.iteration, r.phase, r.start_ns, r.end_ns});
  j["ph"] = std::move(a);
  a = json::array();
  for (const auto& r : f.events) a.push_back({r.start_ns, r.end_ns, r.name, r.layer, r.kind, r.pass, r.iteration, r.thread});
  j["ev"] = std::move(a);
  a = json::array();
  for (const auto& r : f.memory) a.push_back({r.t_ns, r.category, r.live_bytes});
  j["mem"] = std::move(a);
  a = json::array();
  for (const auto& r : f.samples) a.push_back({r.t_ns, r.name, r.value});
  j["sa"] = std::move(a);
  a = json::array();
  for (const auto& r : f.collectives) a.push_back({r.iteration, r.thread, r.collective, r.label, r.bytes, r.start_ns, r.end_ns});
  j["co"] = std::move(a);
  return j;
}

store::RunFlush flush_from(const json& j) {
  store::RunFlush f;
  for (const auto& r : j.at("it")) f.iterations.push_back({r.at(0), r.at(1), r.at(2), r.at(3), r.at(4), r.at(5)});
  for (const auto& r : j.at("ph")) f.phases.push_back({r.at(0), r.at(1), r.at(2), r.at(3)});
  for (const auto& r : j.at("ev")) {
    f.events.push_back({r.at(0), r.at(1), r.at(2), r.at(3), r.at(4), r.at(5), r.at(6), r.at(7)});
  }
  for (const auto& r : j.at("mem")) f.memory.push_back({r.at(0), r.at(1), r.at(2)});
  for (const auto& r : j.at("sa")) f.samples.push_back({r.at(0), r.at(1), r.at(2)});
  for (const auto& r : j.at("co")) {
    store::CollectiveRow c;
    c.iteration = r.at(0);
    c.thread = r.at(1);
    c.collective = r.at(2);
    c.label = r.at(3);
    c.bytes = r.at(4);
    c.start_ns = r.at(5);
    c.end_ns = r.at(6);
    f.collectives.push_back(std::move(c));
  }
  return f;
}

}  // namespace

std::vector<uint8_t> to_bytes(const RankPayload& p) {
  json j = {{"rank", p.rank}, {"final", p.final}, {"flush", flush_json(p.flush)}, {"error", p.error}};
  json a = json::array();
  for (const auto& r : p.breakdown) {
    a.push_back({r.iteration, r.start_ns, r.end_ns, r.compute_ns, r.comm_ns, r.overlap_ns, r.exposed_comm_ns, r.idle_ns,
                 r.backward_wait_ns, r.pull_wait_ns, r.push_wait_ns});
  }
  j["bd"] = std::move(a);
  a = json::array();
  for (const auto& r : p.comm_ops) {
    a.push_back({r.backend, r.collective, r.bytes, r.ranks, r.count, r.total_ns, r.mean_ns, r.min_ns, r.max_ns,
                 r.algbw_gbps, r.busbw_gbps});
  }
  j["ops"] = std::move(a);
  a = json::array();
  for (const auto& r : p.metrics) a.push_back({r.name, r.value, r.unit, r.iteration});
  j["me"] = std::move(a);
  a = json::array();
  for (const auto& r : p.memory_peak) a.push_back({r.category, r.bytes, r.t_ns});
  j["pk"] = std::move(a);
  a = json::array();
  for (const auto& r : p.memory_changes) a.push_back({r.t_ns, r.category, r.owner, r.delta});
  j["mc"] = std::move(a);
  a = json::array();
  for (const auto& r : p.ps_staleness) a.push_back({r.rank, r.iteration, r.kind, r.staleness, r.count});
  j["pst"] = std::move(a);
  a = json::array();
  for (const auto& r : p.ps_servers) {
    a.push_back({r.server, r.rank, r.keys, r.bytes_held, r.bytes_in, r.bytes_out, r.pushes, r.pulls, r.updates,
                 r.busy_ns, r.queue_max, r.queue_mean});
  }
  j["pss"] = std::move(a);
  return json::to_cbor(j);
}

RankPayload from_bytes(const std::vector<uint8_t>& bytes) {
  try {
    const json j = json::from_cbor(bytes);
    RankPayload p;
    p.rank = j.at("rank");
    p.final = j.at("final");
    p.error = j.at("error");
    p.flush = flush_from(j.at("flush"));
    for (const auto& r : j.at("bd")) {
      store::RankBreakdownRow b;
      b.iteration = r.at(0);
      b.start_ns = r.at(1);
      b.end_ns = r.at(2);
      b.compute_ns = r.at(3);
      b.comm_ns = r.at(4);
      b.overlap_ns = r.at(5);
      b.exposed_comm_ns = r.at(6);
      b.idle_ns = r.at(7);
      b.backward_wait_ns = r.at(8);
      b.pull_wait_ns = r.at(9);
      b.push_wait_ns = r.at(10);
      p.breakdown.push_back(b);
    }
    for (const auto& r : j.at("ops")) {
      store::CommOpRow o;
      o.backend = r.at(0);
      o.collective = r.at(1);
      o.bytes = r.at(2);
      o.ranks = r.at(3);
      o.count = r.at(4);
      o.total_ns = r.at(5);
      o.mean_ns = r.at(6);
      o.min_ns = r.at(7);
      o.max_ns = r.at(8);
      o.algbw_gbps = r.at(9);
      o.busbw_gbps = r.at(10);
      p.comm_ops.push_back(std::move(o));
    }
    for (const auto& r : j.at("me")) p.metrics.push_back({r.at(0), r.at(1), r.at(2), r.at(3)});
    for (const auto& r : j.at("pk")) p.memory_peak.push_back({r.at(0), r.at(1), r.at(2)});
    for (const auto& r : j.at("mc")) p.memory_changes.push_back({r.at(0), r.at(1), r.at(2), r.at(3)});
    for (const auto& r : j.at("pst")) {
      store::PsStalenessRow s;
      s.rank = r.at(0);
      s.iteration = r.at(1);
      s.kind = r.at(2);
      s.staleness = r.at(3);
      s.count = r.at(4);
      p.ps_staleness.push_back(std::move(s));
    }
    for (const auto& r : j.at("pss")) {
      store::PsServerRow s;
      s.server = r.at(0);
      s.rank = r.at(1);
      s.keys = r.at(2);
      s.bytes_held = r.at(3);
      s.bytes_in = r.at(4);
      s.bytes_out = r.at(5);
      s.pushes = r.at(6);
      s.pulls = r.at(7);
      s.updates = r.at(8);
      s.busy_ns = r.at(9);
      s.queue_max = r.at(10);
      s.queue_mean = r.at(11);
      p.ps_servers.push_back(s);
    }
    return p;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("a rank's records did not parse: ") + e.what());
  }
}

void stamp_rank(RankPayload& p) {
  const int64_t r = p.rank;
  for (auto& x : p.flush.iterations) x.rank = r;
  for (auto& x : p.flush.phases) x.rank = r;
  for (auto& x : p.flush.events) x.rank = r;
  for (auto& x : p.flush.memory) x.rank = r;
  for (auto& x : p.flush.samples) x.rank = r;
  for (auto& x : p.flush.collectives) x.rank = r;
  for (auto& x : p.breakdown) x.rank = r;
  for (auto& x : p.comm_ops) x.rank = r;
  for (auto& x : p.metrics) x.rank = r;
  for (auto& x : p.memory_peak) x.rank = r;
  for (auto& x : p.memory_changes) x.rank = r;
  // p.ps_staleness and p.ps_servers keep their producer's rank (rank_records.h).
}

}  // namespace ts::session
