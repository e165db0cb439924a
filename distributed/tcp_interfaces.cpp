#include "distributed/tcp_interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>

namespace ts::distributed {

namespace {

std::optional<uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

// One item of a spec: an interface name, or a subnet (a single address is a /32).
struct Item {
  std::string name;
  uint32_t network = 0, mask = 0;
  bool is_subnet = false;
};

std::string trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

std::vector<Item> parse_spec(std::string_view spec) {
  std::vector<Item> items;
  for (size_t at = 0; at <= spec.size();) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string word = trimmed(spec.substr(at, comma - at));
    at = comma + 1;
    if (word.empty()) continue;
    Item item;
    const size_t slash = word.find('/');
    const std::string ip = word.substr(0, slash);
    const auto address = parse_ipv4(ip);
    if (slash != std::string::npos || address) {
      int prefix = 32;
      if (slash != std::string::npos) {
        const std::string bits = word.substr(slash + 1);
        if (bits.empty() || bits.size() > 2 ||
            !std::all_of(bits.begin(), bits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
            (prefix = std::stoi(bits)) > 32) {
          throw std::invalid_argument("TS_TCP_IF: '" + word + "' is no IPv4 subnet (e.g. 10.99.0.0/24)");
        }
      }
      if (!address) throw std::invalid_argument("TS_TCP_IF: '" + word + "' is no IPv4 subnet (e.g. 10.99.0.0/24)");
      item.is_subnet = true;
      item.mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
      item.network = *address & item.mask;
    } else {
      item.name = word;
    }
    items.push_back(std::move(item));
  }
  return items;
}

bool matches(const Item& item, const HostAddress& a) {
  if (!item.is_subnet) return a.interface == item.name;
  const auto ip = parse_ipv4(a.ip);
  return ip && (*ip & item.mask) == item.network;
}

}  // namespace

std::vector<HostAddress> host_addresses() {
  std::vector<HostAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
    std::array<char, INET_ADDRSTRLEN> text{};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (!::inet_ntop(AF_INET, &in->sin_addr, text.data(), text.size())) continue;
    out.push_back({a->ifa_name ? a->ifa_name : "", text.data(), (a->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return out;
}

std::vector<std::string> select_addresses(const std::vector<HostAddress>& all, std::string_view spec) {
  const std::vector<Item> items = parse_spec(spec);
  std::vector<std::string> out, loopback;
  for (const auto& a : all) {
    if (!items.empty() && std::none_of(items.begin(), items.end(), [&](const Item& i) { return matches(i, a); }))
      continue;
    auto& into = a.loopback ? loopback : out;
    if (std::find(out.begin(), out.end(), a.ip) == out.end() &&
        std::find(loopback.begin(), loopback.end(), a.ip) == loopback.end())
      into.push_back(a.ip);
  }
  out.insert(out.end(), loopback.begin(), loopback.end());
  return out;
}

void check_interface_spec(std::string_view spec) { (void)parse_spec(spec); }

std::string describe(const std::vector<HostAddress>& all) {
  std::string out;
  for (const auto& a : all) out += (out.empty() ? "" : ", ") + a.interface + " " + a.ip;
  return out.empty() ? "no IPv4 address" : out;
}

}  // namespace ts::distributed
