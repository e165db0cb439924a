#pragma once
// How a parameter server splits the model into keys and the keys over its server shards, as
// PHub does: every tensor larger than the chunk size is cut into chunks of that size, each its
// own key, and the keys go to the server holding the fewest bytes so far, largest first, so
// that every server carries about the same share of the traffic. Every rank computes the same
// layout from the same parameter sizes; nothing about it is exchanged.
#include <cstdint>
#include <string>
#include <vector>

namespace ts::distributed::ps {

// One parameter of a gradient group, as the layout sees it.
struct TensorSpec {
  std::string name;
  int64_t numel = 0;
  std::string layout = "plain";  // engine::Layout::str(): ranks exchange raw storage, so it must agree
};

struct Key {
  int id = 0;
  int group = 0;       // the gradient group (workloads::Workload::gradient_groups)
  int tensor = 0;      // the parameter's index within its group
  int64_t offset = 0;  // the chunk's first element within the parameter
  int64_t count = 0;   // its elements
  int server = 0;
  // Lower goes first when priority is on: the parameter's place in its group (registration
  // order, which is forward order: the front layers, which the next forward needs first).
  int priority = 0;
  std::string name;  // "fc1.weight" or "fc1.weight[2/4]"
  int64_t bytes() const { return count * 4; }
};

struct KeyLayout {
  std::vector<Key> keys;                                 // by id
  std::vector<std::vector<std::vector<int>>> of_tensor;  // [group][tensor]: its keys, by offset
  std::vector<int64_t> server_bytes;                     // what each server holds

  // The largest server's bytes over the mean: 1 is perfect balance.
  double imbalance() const;
};

// `groups[g][t]`: parameter t of group g. chunk_elements >= 1. Throws std::invalid_argument on
// servers < 1 or an empty parameter list.
KeyLayout plan_keys(const std::vector<std::vector<TensorSpec>>& groups, int servers, int64_t chunk_elements);

}  // namespace ts::distributed::ps
