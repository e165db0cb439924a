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

// The run of `in` that is `run`, if any (where a spilled run's streamed part lies, or a copy
// imported before): the same uuid; for runs written before schema v9, which have none, the same
// writer (host, boot, pid and its start time) and start time.
std::optional<int64_t> find_same_run(Reader& in, const RunRow& run);

// Which of two copies of one run to keep: never an older or less complete one. More complete:
// finished over running, then more iterations, then more metrics (a final write), then the
// later heartbeat. `why` says the choice in words.
struct CopyChoice {
  bool replace = false;  // the incoming copy replaces the existing one
  std::string why;
};
CopyChoice choose_copy(Reader& existing_db, const RunRow& existing, Reader& incoming_db, const RunRow& incoming);

}  // namespace ts::store
