#pragma once
// Copying runs between trainscope databases: `trainscope import` merges a spill file (a run
// whose final write found its db locked) or another machine's db into a db.
#include <cstdint>
#include <optional>

#include "store/reader.h"
#include "store/writer.h"

namespace ts::store {

// Copies run `id` of `from`, every table, into `to` in one transaction and returns its id
// there. `replace` > 0: that run of `to` is deleted in the same transaction and the copy takes
// its id (a spilled run merged over the part of it that was streamed before the spill).
int64_t copy_run(Reader& from, int64_t id, Writer& to, int64_t replace = 0);

// The run of `in` written by the same process as `run` (host, boot, pid and its start time,
// started_at), if any: where a spilled run's streamed part lies.
std::optional<int64_t> find_same_run(Reader& in, const RunRow& run);

}  // namespace ts::store
