#include "memprof/category.h"

namespace ts::memprof {

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
    case Category::weights: return "Weights";
    case Category::weight_grads: return "Gradients";
    case Category::activations: return "Feature maps";
    case Category::workspace: return "Workspace";
    default: return "Dynamic";
  }
}

std::string tbd_class_of(std::string_view category) {
  const auto c = parse_category(category);
  return c ? std::string(tbd_class(*c)) : std::string("?");
}

}  // namespace ts::memprof
