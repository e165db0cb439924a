#include "viewer/models/run_details.h"

#include "store/error.h"
#include "store/reader.h"
#include "vocabulary/memory_category.h"

namespace ts::viewer {

RunDetails load_run_details(const std::filesystem::path& db, int64_t run_id) {
  store::Reader reader(db);
  const auto run = reader.run(run_id);
  if (!run)
    throw store::StoreError(store::StoreError::Kind::not_found,
                            "run " + std::to_string(run_id) + " is not in " + db.string());
  RunDetails d;
  d.digest = reports::digest_run(reader, db, *run, vocabulary::tbd_class_of, {.interference = false});  // not shown
  d.ops = reader.op_summary(run_id);
  d.layers = reader.layers(run_id);
  return d;
}

}  // namespace ts::viewer
