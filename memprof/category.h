#pragma once
// The categories are the vocabulary's (vocabulary/memory_category.h); these names keep
// memprof::Category working for the code that tags allocations through the ledger.
#include "vocabulary/memory_category.h"

namespace ts::memprof {

using vocabulary::Category;
using vocabulary::kAllCategories;
using vocabulary::kCategoryCount;
using vocabulary::kTbdClasses;
using vocabulary::parse_category;
using vocabulary::tbd_class;
using vocabulary::tbd_class_of;
using vocabulary::to_string;

}  // namespace ts::memprof
