// `trainscope bench collectives` across network-namespace hosts (scripts/netns-hosts) whose link
// is shaped to 1 Gbit/s: the TCP rate of the link is measured (one stream, tsh1 -> tsh2), stored
// beside the rows, and each row's busbw is given as a fraction of it; a parameter server's
// messages across it are timed and stored too. Needs root and `ip netns`;
// skipped, saying why, where they cannot be made.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/netns_hosts.h"

namespace {

using ts::testing::run_command;
using ts::testing::run_trainscope;
using ts::testing::TempDir;

using ts::testing::kOverHosts;
using ts::testing::NetnsHosts;
using OneTestAtATime = ts::testing::OneNetnsTestAtATime;
const auto why_no_hosts = ts::testing::why_no_netns_hosts;

TEST(NetnsBench, TheLinksTcpRateIsMeasuredAndBusbwSetAgainstIt) {
  const OneTestAtATime alone;
  if (const std::string why = why_no_hosts(); !why.empty()) GTEST_SKIP() << why;
  NetnsHosts hosts("2 --rate 1gbit");
  ASSERT_EQ(hosts.made().exit_code, 0) << hosts.made().out;

  TempDir dir;
  const auto db = dir / "b.db";
  const auto res = run_trainscope("bench collectives --hosts tsh1:1,tsh2:1" + kOverHosts +
                                  " --collectives all_reduce --min-bytes 1M --max-bytes 4M --iters 3 --warmup 1 "
                                  "--json --db " +
                                  db.string() + " 2>/dev/null");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  const auto j = nlohmann::json::parse(res.out.substr(res.out.find('{')));
  const auto& tcp = j["tcp_rate"];
  ASSERT_TRUE(tcp["measured"].get<bool>()) << tcp.dump();
  EXPECT_EQ(tcp["from_rank"], 0);
  EXPECT_EQ(tcp["to_rank"], 1);
  EXPECT_EQ(tcp["address"].get<std::string>().rfind("10.99.0.12:", 0), 0u) << tcp.dump();
  // 1 Gbit/s shaped (docs/netns-hosts.md: one stream 0.957 Gbit/s): 0.125 GB/s at most.
  const double gbps = tcp["gbps"].get<double>();
  EXPECT_GT(gbps, 0.08) << tcp.dump();
  EXPECT_LT(gbps, 0.13) << tcp.dump();
  ASSERT_EQ(j["rows"].size(), 3u);  // 1, 2, 4 MiB
  for (const auto& row : j["rows"]) {
    SCOPED_TRACE(row.dump());
    EXPECT_DOUBLE_EQ(row["busbw_tcp_fraction"].get<double>(), row["busbw_gbps"].get<double>() / gbps);
    EXPECT_GT(row["busbw_tcp_fraction"].get<double>(), 0.05);
    EXPECT_LT(row["busbw_tcp_fraction"].get<double>(), 1.2);
  }

  ts::store::Reader r(db);
  const auto run = r.runs().at(0);
  bool metric = false;
  for (const auto& m : r.metrics(run.id)) {
    if (m.name == "tcp_rate_gbps") {
      metric = true;
      EXPECT_DOUBLE_EQ(m.value, gbps);
      EXPECT_EQ(m.unit, "GB/s");
    }
  }
  EXPECT_TRUE(metric);
  // A parameter server's messages tsh2 -> tsh1, per size: alone, beside a busy thread, the rate
  // that thread kept. A 4 MiB message cannot cross 1 Gbit/s in under 4 MiB / 0.125 GB/s = 33.5 ms,
  // alone or not; smaller ones may pass within the shaper's burst, and a busy machine stretches any
  // (so no order among them is asserted).
  std::map<int64_t, std::array<double, 3>> messages;
  for (const auto& m : r.metrics(run.id)) {
    for (const auto& [i, name] : {std::pair{0, "ps_message_ns."}, std::pair{1, "ps_message_beside_ns."},
                                  std::pair{2, "ps_message_beside_rate."}}) {
      if (m.name.rfind(name, 0) == 0) messages[std::stoll(m.name.substr(std::string(name).size()))][i] = m.value;
    }
  }
  ASSERT_EQ(messages.size(), 5u);
  ASSERT_EQ(j["ps_messages"].size(), 5u) << j["ps_messages"].dump();
  EXPECT_DOUBLE_EQ(j["ps_messages"][4]["ns"].get<double>(), messages.at(4 << 20)[0]);
  for (const auto& [bytes, f] : messages) {
    SCOPED_TRACE(bytes);
    EXPECT_GT(f[0], 0);
    EXPECT_GT(f[1], 0);
    EXPECT_GT(f[2], 0);
  }
  EXPECT_GT(messages.at(4 << 20)[1], 33.5e6);
  EXPECT_GT(messages.at(4 << 20)[0], 33.5e6);
  std::string described;
  for (const auto& e : r.environment(run.id)) {
    if (e.key == "tcp_rate") described = e.value;
  }
  EXPECT_EQ(described.rfind("rank 0 -> rank 1 (10.99.0.12:", 0), 0u) << described;
  const auto show = run_trainscope("show " + std::to_string(run.id) + " --db " + db.string());
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("%tcp"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("the link's TCP rate"), std::string::npos) << show.out;
}

}  // namespace
