#pragma once
// Which of its host's IPv4 addresses a rank offers the TCP ring's neighbours (tcp_ring.h), and in
// which order they try them. By default every address that is up, loopback last (ranks on one
// host reach each other there; other hosts' ranks reach a non-loopback one). The environment's
// TS_TCP_IF narrows it (the launcher passes it to every rank): a comma-separated list of
// interface names ("eth0"), subnets in CIDR form ("10.99.0.0/24") or single addresses
// ("10.99.0.11"); an address is offered when any item matches, in the host's order.
#include <string>
#include <string_view>
#include <vector>

namespace ts::distributed {

struct HostAddress {
  std::string interface;  // "eth0", "lo"
  std::string ip;         // dotted IPv4
  bool loopback = false;
};

// This host's IPv4 addresses on interfaces that are up, as getifaddrs lists them.
std::vector<HostAddress> host_addresses();

// The IPs of `all` that `spec` (TS_TCP_IF's form; "" for all of them) selects: non-loopback
// first, loopback last, each once. Empty when none matches. Throws std::invalid_argument on a
// malformed spec (an item with a '/' that is no IPv4 subnet, a prefix above 32).
std::vector<std::string> select_addresses(const std::vector<HostAddress>& all, std::string_view spec);

// Throws std::invalid_argument when `spec` is malformed (the launcher checks TS_TCP_IF once).
void check_interface_spec(std::string_view spec);

// "eth0 10.99.0.11, lo 127.0.0.1": for messages that say what a host had.
std::string describe(const std::vector<HostAddress>& all);

}  // namespace ts::distributed
