#pragma once
// Identity and version of trainscope database files (docs/schema.md).
#include <cstdint>

namespace ts::store {

inline constexpr int32_t kApplicationId = 0x54534350;  // 'TSCP', in PRAGMA application_id
inline constexpr int kSchemaVersion = 15;              // PRAGMA user_version written by this build

}  // namespace ts::store
