#include "distributed/rank_hosts.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <utility>

namespace ts::distributed {

std::vector<std::string> gather_host_names(Communicator& comm) {
  constexpr size_t kName = 256;  // HOST_NAME_MAX + 1 on Linux
  std::array<char, kName> mine{};
  if (::gethostname(mine.data(), kName - 1) != 0) mine = {'?'};
  std::vector<char> all(kName * static_cast<size_t>(comm.size()));
  comm.set_recording(false);
  comm.all_gather(mine.data(), all.data(), kName, DataType::u8, "host names");
  comm.set_recording(true);
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r) out.emplace_back(all.data() + kName * static_cast<size_t>(r));
  return out;
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
