#pragma once
// Memory categories (DESIGN.md "Memory categories") and their TBD classes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ts::memprof {

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

std::string_view to_string(Category c);
// The inverse of to_string; nullopt for anything else.
std::optional<Category> parse_category(std::string_view name);
// TBD's five classes: "Weights", "Gradients", "Feature maps", "Workspace", "Dynamic".
std::string_view tbd_class(Category c);
// The same for a stored category name; "?" for a name this build does not know.
std::string tbd_class_of(std::string_view category);

inline constexpr std::array<Category, kCategoryCount> kAllCategories = {
    Category::weights,    Category::weight_grads, Category::optimizer_state,
    Category::activations, Category::activation_grads, Category::workspace,
    Category::inputs,     Category::comm,         Category::other};

}  // namespace ts::memprof
