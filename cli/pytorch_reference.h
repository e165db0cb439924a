#pragma once
// `trainscope run W --framework pytorch` (issue 42): the workload's PyTorch reference
// (bench/pytorch/W_train.py, the same preset, batch, threads, seed and iterations) run under
// PyTorch's profiler, one profiler step per iteration, and its trace imported as a run of framework
// `pytorch` (importers/kineto_import.h) with what the script knows beyond the trace: each step's
// samples, tokens and loss, the workload's units, the parameters, torch's build (BLAS, oneDNN) and
// the process's peak memory. PyTorch is an outside dependency (PyPI): where `python3` (or
// TS_PYTHON) cannot import it, the command says how to install it and exits 2, writing nothing.
#include <filesystem>
#include <string>

#include "cli/run_command.h"
#include "cli/run_config.h"

namespace ts::cli {

// The reference script for `workload` in bench/pytorch (TS_PYTORCH_REFERENCES overrides the
// folder); UsageError for a workload without one. a3c's is the learner's update alone.
std::filesystem::path pytorch_reference(const std::string& workload);

// Runs the reference (TS_PYTHON: which Python, default python3; TS_PYTORCH_ARGS: more arguments
// for the script, a variant such as --channels-last) and imports its trace; the trace stays beside the db (DB.traces/),
// named in the run's environment (`imported_from`). UsageError (nothing written) for options the references do not
// have, a missing PyTorch or a script that refuses its arguments.
RunOutcome run_pytorch_reference(const RunConfig& config);

}  // namespace ts::cli
