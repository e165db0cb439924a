#pragma once
// The environment a run was measured in: hardware, OS, compiler, build, library versions and
// the git revision, as key/value pairs. What cannot be read is "unknown"; nothing throws.
#include <string>
#include <vector>

namespace ts::collectors {

struct Entry {
  std::string key;
  std::string value;
};

// Keys: cpu.model, cpu.kind (vendor, family and model numbers), cpu.logical_cores, cpu.physical_cores, cpu.isa, memory.total_bytes,
// os.name, os.kernel, host.name, compiler, build.type, trainscope.version, git.revision,
// lib.onednn, lib.sqlite, lib.openmp, omp.max_threads, env.OMP_WAIT_POLICY,
// env.GOMP_SPINCOUNT and env.TS_OPENMP_WAITING (why that spin count; cli/openmp_waiting.h)
// ("unset" where not set), and cuda.toolkit in CUDA builds.
std::vector<Entry> snapshot();

}  // namespace ts::collectors
