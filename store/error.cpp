#include "store/error.h"

namespace ts::store {

std::string_view to_string(StoreError::Kind kind) {
  switch (kind) {
    case StoreError::Kind::io: return "io";
    case StoreError::Kind::not_trainscope: return "not_trainscope";
    case StoreError::Kind::newer_schema: return "newer_schema";
    case StoreError::Kind::corrupt: return "corrupt";
    case StoreError::Kind::not_found: return "not_found";
    case StoreError::Kind::busy: return "busy";
  }
  return "unknown";
}

}  // namespace ts::store
