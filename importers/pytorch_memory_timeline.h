#pragma once
// PyTorch's memory profiler timeline (`prof.export_memory_timeline(path.json, device)`, with
// record_shapes, profile_memory and with_stack on): `[times, sizes]`, times in microseconds on the
// trace's clock, each `sizes` entry the live bytes of every category at that time. Read into
// trainscope's memory categories (vocabulary/memory_category.h), each mapping written down here
// and in docs/import.md:
//   PARAMETER -> weights, GRADIENT -> weight_grads, OPTIMIZER_STATE -> optimizer_state,
//   ACTIVATION -> activations, AUTOGRAD_DETAIL (backward's own tensors: the gradients of
//   activations) -> activation_grads, TEMPORARY (made and freed within one op) -> workspace,
//   INPUT -> inputs, and what PyTorch could not categorise -> other.
// Nothing maps onto `comm` (PyTorch does not tell communication buffers apart).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "store/records.h"

namespace ts::importers {

struct MemoryTimeline {
  std::vector<store::MemoryPoint> points;  // at most max_points times, each category at each
  std::vector<store::MemoryPeakRow> peak;  // every category at the time the total peaked
  int64_t peak_bytes = 0;                  // that total (PyTorch's own sum at its peak)
  int64_t times = 0;                       // time points in the file
};

// PyTorch's categories, in the order of export_memory_timeline's sizes (after its unused first
// entry: torch.profiler._memory_profiler's _CATEGORY_TO_INDEX), and trainscope's for each.
struct CategoryMapping {
  const char* pytorch;
  const char* trainscope;
};
inline constexpr CategoryMapping kPytorchCategories[] = {{"PARAMETER", "weights"},
                                                         {"OPTIMIZER_STATE", "optimizer_state"},
                                                         {"INPUT", "inputs"},
                                                         {"TEMPORARY", "workspace"},
                                                         {"ACTIVATION", "activations"},
                                                         {"GRADIENT", "weight_grads"},
                                                         {"AUTOGRAD_DETAIL", "activation_grads"},
                                                         {"None", "other"}};

// Reads the file; times become ns from `origin_us` (the trace's first record). The points kept
// are evenly spread over the file's (the one of the largest total in each stretch, so that the
// peak is among them). TraceError (malformed) for a file that is not such a timeline.
MemoryTimeline read_memory_timeline(const std::filesystem::path& path, double origin_us, size_t max_points = 2000);

// "PARAMETER -> weights, ...": the mapping as the run's environment says it.
std::string category_mapping_text();

}  // namespace ts::importers
