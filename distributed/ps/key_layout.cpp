#include "distributed/ps/key_layout.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace ts::distributed::ps {

double KeyLayout::imbalance() const {
  const int64_t total = std::accumulate(server_bytes.begin(), server_bytes.end(), int64_t{0});
  if (total == 0 || server_bytes.empty()) return 1.0;
  const double mean = static_cast<double>(total) / static_cast<double>(server_bytes.size());
  return static_cast<double>(*std::max_element(server_bytes.begin(), server_bytes.end())) / mean;
}

KeyLayout plan_keys(const std::vector<std::vector<TensorSpec>>& groups, int servers, int64_t chunk_elements) {
  if (servers < 1) throw std::invalid_argument("a parameter server needs at least one server");
  if (chunk_elements < 1) throw std::invalid_argument("the chunk size must be at least one element");
  KeyLayout layout;
  layout.of_tensor.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    layout.of_tensor[g].resize(groups[g].size());
    for (size_t t = 0; t < groups[g].size(); ++t) {
      const TensorSpec& spec = groups[g][t];
      if (spec.numel < 1) throw std::invalid_argument("parameter '" + spec.name + "' has no elements");
      const int64_t chunks = (spec.numel + chunk_elements - 1) / chunk_elements;
      for (int64_t c = 0; c < chunks; ++c) {
        Key k;
        k.id = static_cast<int>(layout.keys.size());
        k.group = static_cast<int>(g);
        k.tensor = static_cast<int>(t);
        k.offset = c * chunk_elements;
        k.count = std::min(chunk_elements, spec.numel - k.offset);
        k.priority = static_cast<int>(t);
        k.name = chunks == 1 ? spec.name : spec.name + "[" + std::to_string(c + 1) + "/" + std::to_string(chunks) + "]";
        layout.of_tensor[g][t].push_back(k.id);
        layout.keys.push_back(std::move(k));
      }
    }
  }
  if (layout.keys.empty()) throw std::invalid_argument("a parameter server needs parameters to hold");
  // Largest first onto the least loaded server (ties: the lower key id, then the lower server):
  // the greedy bin balancing whose largest server is within one key of the optimum.
  std::vector<int> order(layout.keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return layout.keys[static_cast<size_t>(a)].count > layout.keys[static_cast<size_t>(b)].count;
  });
  layout.server_bytes.assign(static_cast<size_t>(servers), 0);
  for (int id : order) {
    const auto least =
        std::min_element(layout.server_bytes.begin(), layout.server_bytes.end()) - layout.server_bytes.begin();
    Key& k = layout.keys[static_cast<size_t>(id)];
    k.server = static_cast<int>(least);
    layout.server_bytes[static_cast<size_t>(least)] += k.bytes();
  }
  return layout;
}

}  // namespace ts::distributed::ps
