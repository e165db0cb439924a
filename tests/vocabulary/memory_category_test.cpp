#include "vocabulary/memory_category.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace ts::vocabulary {
namespace {

TEST(MemoryCategory, NamesRoundTrip) {
  std::set<std::string_view> names;
  for (Category c : kAllCategories) {
    EXPECT_EQ(parse_category(to_string(c)), c) << to_string(c);
    names.insert(to_string(c));
  }
  EXPECT_EQ(names.size(), kCategoryCount);  // no two categories share a stored name
  EXPECT_EQ(parse_category("bogus"), std::nullopt);
  EXPECT_EQ(parse_category(""), std::nullopt);
  EXPECT_EQ(parse_category("Weights"), std::nullopt);  // stored names are exact
}

// The store and the ledger index arrays by the enum's value: the list must be in that order.
TEST(MemoryCategory, ListIsInEnumOrder) {
  for (size_t i = 0; i < kCategoryCount; ++i) EXPECT_EQ(static_cast<size_t>(kAllCategories[i]), i);
}

// Stored names are part of the store's format (docs/schema.md): renaming one orphans old runs.
TEST(MemoryCategory, StoredNames) {
  const std::vector<std::string_view> expected = {
      "weights", "weight_grads", "optimizer_state", "activations", "activation_grads", "workspace", "inputs",
      "comm",    "other"};
  ASSERT_EQ(expected.size(), kCategoryCount);
  for (size_t i = 0; i < kCategoryCount; ++i) EXPECT_EQ(to_string(kAllCategories[i]), expected[i]);
}

TEST(TbdClass, Mapping) {
  EXPECT_EQ(tbd_class(Category::weights), "Weights");
  EXPECT_EQ(tbd_class(Category::weight_grads), "Gradients");
  EXPECT_EQ(tbd_class(Category::activations), "Feature maps");
  EXPECT_EQ(tbd_class(Category::workspace), "Workspace");
  for (Category c :
       {Category::optimizer_state, Category::activation_grads, Category::inputs, Category::comm, Category::other}) {
    EXPECT_EQ(tbd_class(c), "Dynamic") << to_string(c);
  }
}

// The report's columns follow TBD's figure: this order.
TEST(TbdClass, InTheOrderOfTbdsFigure) {
  const std::vector<std::string_view> expected = {"Weights", "Gradients", "Feature maps", "Workspace", "Dynamic"};
  EXPECT_EQ(std::vector<std::string_view>(kTbdClasses.begin(), kTbdClasses.end()), expected);
}

// Every category lands in one of TBD's five, and each of the five gets at least one category.
TEST(TbdClass, MappingIsTotalAndOnto) {
  std::set<std::string_view> hit;
  for (Category c : kAllCategories) {
    const auto cls = tbd_class(c);
    EXPECT_NE(std::find(kTbdClasses.begin(), kTbdClasses.end(), cls), kTbdClasses.end()) << to_string(c);
    hit.insert(cls);
  }
  EXPECT_EQ(hit.size(), kTbdClasses.size());
}

TEST(TbdClass, OfStoredName) {
  for (Category c : kAllCategories) EXPECT_EQ(tbd_class_of(to_string(c)), tbd_class(c));
  EXPECT_EQ(tbd_class_of("from_a_newer_build"), "?");
}

}  // namespace
}  // namespace ts::vocabulary
