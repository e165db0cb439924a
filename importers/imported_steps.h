#pragma once
// What every importer writes or names the same way (issue 42): the run's name and times, and once
// it knows a trace's steps, the
// iterations with what the caller knows of each step (ImportOptions::steps: samples, tokens,
// loss; the first warmup_steps out of the figures), the rates of the timed steps by
// vocabulary/rates.h's formula (none unless every timed step's work is known), and the GPU time
// breakdown per step as Holistic Trace Analysis defines it (profiler/gpu_analysis.h).
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "importers/kineto_import.h"
#include "profiler/gpu_analysis.h"
#include "store/writer.h"

namespace ts::importers {

// A UTC time as the store writes it: "2026-11-28T21:10:00Z".
std::string iso_time(std::time_t t);
// The run's workload name: ImportOptions::workload, else the file's name less each of `extensions`
// in turn where it ends with it (".gz", then ".json"); "imported" where nothing is left.
std::string run_name(const std::filesystem::path& file, const ImportOptions& o,
                     std::initializer_list<std::string_view> extensions);

// A step in the run's time (ns from the trace's first record), in time order.
struct ImportedStep {
  int64_t index = 0;
  int64_t start_ns = 0, end_ns = 0;
};

// Writes the iteration rows and the whole-run metrics (rates, timed_iterations, parameter_count,
// tokens per step, ImportOptions::metrics, then `extra`). Returns the timed steps of measurable time.
int64_t write_steps(store::Writer& w, int64_t run, std::span<const ImportedStep> steps, const ImportOptions& o,
                    std::vector<store::MetricRow> extra = {});

// The GPU breakdown rows of the device work (kernels, communication, copies, sets) per iteration.
void write_gpu_breakdown(store::Writer& w, int64_t run, std::span<const profiler::GpuActivity> device_work);

}  // namespace ts::importers
