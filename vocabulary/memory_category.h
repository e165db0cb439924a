#pragma once
// The memory categories (docs/design.md, "Memory categories"): the tags the engine's allocators
// put on every allocation, the names the store keeps and reports and the viewer show, and how
// they fall into TBD's five classes. One list, so a new category cannot be named in one place
// and missed in another.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ts::vocabulary {

enum class Category : uint8_t {
  weights,
  weight_grads,
  optimizer_state,
  activations,
  activation_grads,
  workspace,
  inputs,
  comm,
  other
};
inline constexpr size_t kCategoryCount = 9;

inline constexpr std::array<Category, kCategoryCount> kAllCategories = {Category::weights,
                                                                        Category::weight_grads,
                                                                        Category::optimizer_state,
                                                                        Category::activations,
                                                                        Category::activation_grads,
                                                                        Category::workspace,
                                                                        Category::inputs,
                                                                        Category::comm,
                                                                        Category::other};

// The stored name ("weight_grads").
std::string_view to_string(Category c);
// The inverse of to_string; nullopt for anything else.
std::optional<Category> parse_category(std::string_view name);

// TBD's five classes, in the order of its figure.
inline constexpr std::array<std::string_view, 5> kTbdClasses = {"Weights", "Gradients", "Feature maps", "Workspace",
                                                                "Dynamic"};
// weights -> Weights, weight_grads -> Gradients, activations -> Feature maps,
// workspace -> Workspace, the rest -> Dynamic.
std::string_view tbd_class(Category c);
// The same for a stored category name; "?" for a name this build does not know (a store
// written by a newer build).
std::string tbd_class_of(std::string_view category);

}  // namespace ts::vocabulary
