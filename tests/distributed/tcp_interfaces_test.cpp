// Which addresses a rank offers the TCP ring (distributed/tcp_interfaces.h): every one that is up,
// loopback last, or those TS_TCP_IF names by interface, subnet or address; a malformed spec refused.
#include "distributed/tcp_interfaces.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace ts::distributed {
namespace {

const std::vector<HostAddress> kHost = {
    {"lo", "127.0.0.1", true},       {"eth0", "10.99.0.11", false}, {"docker0", "172.17.0.1", false},
    {"eth1", "192.168.7.20", false}, {"eth1", "10.99.1.5", false},
};

using Ips = std::vector<std::string>;

TEST(TcpInterfaces, EveryAddressLoopbackLastByDefault) {
  EXPECT_EQ(select_addresses(kHost, ""), (Ips{"10.99.0.11", "172.17.0.1", "192.168.7.20", "10.99.1.5", "127.0.0.1"}));
  EXPECT_EQ(select_addresses(kHost, " , "), select_addresses(kHost, ""));
  // An address listed twice (two labels of one interface) is offered once.
  std::vector<HostAddress> twice = kHost;
  twice.push_back({"eth0:1", "10.99.0.11", false});
  EXPECT_EQ(select_addresses(twice, ""), select_addresses(kHost, ""));
}

TEST(TcpInterfaces, ByInterfaceNameSubnetOrAddress) {
  EXPECT_EQ(select_addresses(kHost, "eth1"), (Ips{"192.168.7.20", "10.99.1.5"}));
  EXPECT_EQ(select_addresses(kHost, "10.99.0.0/16"), (Ips{"10.99.0.11", "10.99.1.5"}));
  EXPECT_EQ(select_addresses(kHost, "10.99.0.0/24"), (Ips{"10.99.0.11"}));
  EXPECT_EQ(select_addresses(kHost, "10.99.0.77/24"), (Ips{"10.99.0.11"}));  // host bits ignored
  EXPECT_EQ(select_addresses(kHost, "172.17.0.1"), (Ips{"172.17.0.1"}));
  EXPECT_EQ(select_addresses(kHost, "lo, eth0"), (Ips{"10.99.0.11", "127.0.0.1"}));
  EXPECT_EQ(select_addresses(kHost, "0.0.0.0/0"), select_addresses(kHost, ""));
  EXPECT_TRUE(select_addresses(kHost, "ib0").empty());
  EXPECT_TRUE(select_addresses(kHost, "192.0.2.0/24").empty());
}

TEST(TcpInterfaces, AMalformedSpecIsRefused) {
  for (const char* bad :
       {"10.99.0.0/33", "10.99.0.0/", "10.99.0/24", "300.1.1.1/8", "10.0.0.0/x", "eth0, 10.0.0.0/100"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(select_addresses(kHost, bad), std::invalid_argument);
    EXPECT_THROW(check_interface_spec(bad), std::invalid_argument);
  }
  EXPECT_NO_THROW(check_interface_spec("eth0,10.99.0.0/24,127.0.0.1"));
}

TEST(TcpInterfaces, ThisHostHasLoopback) {
  const auto here = host_addresses();
  EXPECT_NE(select_addresses(here, "127.0.0.0/8"), Ips{}) << describe(here);
  EXPECT_EQ(select_addresses(here, "").back().rfind("127.", 0), 0u) << describe(here);
}

}  // namespace
}  // namespace ts::distributed
