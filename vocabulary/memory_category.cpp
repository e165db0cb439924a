#include "vocabulary/memory_category.h"

namespace ts::vocabulary {

// The store and the ledger index per-category arrays by the enum's value.
static_assert(static_cast<size_t>(Category::other) + 1 == kCategoryCount);

std::string_view to_string(Category c) {
  switch (c) {
    case Category::weights: return "weights";
    case Category::weight_grads: return "weight_grads";
    case Category::optimizer_state: return "optimizer_state";
    case Category::activations: return "activations";
    case Category::activation_grads: return "activation_grads";
    case Category::workspace: return "workspace";
    case Category::inputs: return "inputs";
    case Category::comm: return "comm";
    case Category::other: return "other";
  }
  return "unknown";
}

std::optional<Category> parse_category(std::string_view name) {
  for (Category c : kAllCategories) {
    if (to_string(c) == name) return c;
  }
  return std::nullopt;
}

std::string_view tbd_class(Category c) {
  switch (c) {
    case Category::weights: return kTbdClasses[0];
    case Category::weight_grads: return kTbdClasses[1];
    case Category::activations: return kTbdClasses[2];
    case Category::workspace: return kTbdClasses[3];
    default: return kTbdClasses[4];
  }
}

std::string tbd_class_of(std::string_view category) {
  const auto c = parse_category(category);
  return c ? std::string(tbd_class(*c)) : std::string("?");
}

}  // namespace ts::vocabulary
