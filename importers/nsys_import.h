#pragma once
// An Nsight Systems report exported to SQLite (`nsys export --type sqlite report.nsys-rep`, or
// the .sqlite `nsys stats` writes beside it) read into the store as a run (issue 42, item 2):
// what the export holds, mapped onto the store's records as a PyTorch trace's are
// (importers/kineto_import.h); what it does not hold is said to be absent, never stored as zero.
// Two passes of streamed, time-ordered queries (a survey, then the rows): memory is bounded by
// what the survey keeps (the steps, the threads) and the GPU's device work (for the breakdown),
// not by the file; SQLite sorts in its temp files.
//
// The mapping (docs/import.md):
// - NVTX ranges (push/pop and start/end, closed) are `phase` events, except the steps: ranges
//   whose text is `ProfilerStep#N`, `step N`, `iteration N` or `iter N` (any case; the word and
//   N joined by spaces, '#', '_', ':' or '-') on the thread that holds the first of them, which
//   are iterations N (their CPU span) and `iteration` events; events take the iteration whose
//   step holds their start. Threads (globalTid) are numbered in order of their first range.
// - GPU: CUPTI kernels (HTA's rule: a name with "nccl" is communication), copies and sets on
//   their device and stream; CUDA runtime calls as `api` (device -1, the OS thread as stream).
//   Each GPU activity takes the iteration of the runtime call that launched it (by correlation
//   id within its process), else of its own start.
// - The GPU time breakdown per iteration and device, as Holistic Trace Analysis defines it.
// - NVTX marks, domains and unclosed ranges, OS runtime calls and CUDA synchronisation are left
//   out, counted.
#include <filesystem>

#include "importers/kineto_import.h"  // ImportOptions, ImportedRun

namespace ts::importers {

// Reads the export `sqlite` and writes it into `db` as one completed run (framework "nsys").
// What is no nsys export (not SQLite, SQLite without its tables) or cannot be read (cut short,
// damaged) is a TraceError and leaves nothing in the db: a failure once the run is begun
// removes it again.
ImportedRun import_nsys_export(const std::filesystem::path& sqlite, const std::filesystem::path& db,
                               const ImportOptions& options);

}  // namespace ts::importers
