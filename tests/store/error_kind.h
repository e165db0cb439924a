#pragma once
// The kind of StoreError a call throws (a test failure, and `io`, when it throws none).
#include <gtest/gtest.h>

#include "store/error.h"

namespace ts::testing {

template <class F>
ts::store::StoreError::Kind error_kind(F&& f) {
  try {
    f();
  } catch (const ts::store::StoreError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "expected a StoreError";
  return ts::store::StoreError::Kind::io;
}

}  // namespace ts::testing
