#include "distributed/rank_hosts.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <utility>

namespace ts::distributed {

namespace {

constexpr size_t kName = 256;  // HOST_NAME_MAX + 1 on Linux

std::vector<std::string> gather_names(Communicator& comm, const std::array<char, kName>& mine) {
  std::vector<char> all(kName * static_cast<size_t>(comm.size()));
  comm.set_recording(false);
  comm.all_gather(mine.data(), all.data(), kName, DataType::u8, "host names");
  comm.set_recording(true);
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r) out.emplace_back(all.data() + kName * static_cast<size_t>(r));
  return out;
}

}  // namespace

std::vector<std::string> gather_host_names(Communicator& comm) {
  std::array<char, kName> mine{};
  if (::gethostname(mine.data(), kName - 1) != 0) mine = {'?'};
  return gather_names(comm, mine);
}

std::vector<std::string> gather_machine_ids(Communicator& comm) {
  std::array<char, kName> mine{};
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id) || id.empty()) {  // unknown: this rank counts as a machine of its own
    id = "?";
    std::array<char, kName> host{};
    if (::gethostname(host.data(), kName - 1) == 0) id += host.data();
  }
  id.copy(mine.data(), kName - 1);
  return gather_names(comm, mine);
}

int most_ranks_per_machine(const std::vector<std::string>& machine_ids) {
  int most = 1;
  for (const auto& id : machine_ids)
    most = std::max(most, static_cast<int>(std::count(machine_ids.begin(), machine_ids.end(), id)));
  return most;
}

std::string describe_placement(const std::vector<std::string>& hosts) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& h : hosts) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == h; });
    if (it == counts.end()) {
      counts.emplace_back(h, 1);
    } else {
      ++it->second;
    }
  }
  std::string s;
  for (const auto& [h, n] : counts) s += (s.empty() ? "" : ", ") + h + " x" + std::to_string(n);
  return s;
}

}  // namespace ts::distributed
