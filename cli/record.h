#pragma once
// Turns what a run measured (loop results, tracer events, the memory ledger, samples) into
// the store's rows: the one place where profiler/memprof results meet the store's records.
#include <span>
#include <vector>

#include "collectors/environment.h"
#include "collectors/process_sampler.h"
#include "engine/nn/module.h"
#include "profiler/event.h"
#include "store/records.h"
#include "store/writer.h"
#include "workloads/training_loop.h"

namespace ts::cli {

std::vector<store::EnvEntry> to_env_rows(const std::vector<collectors::Entry>& entries);

class RunRecorder {
 public:
  RunRecorder(store::Writer& writer, int64_t run_id) : writer_(writer), run_(run_id) {}
  void set_parameter_count(int64_t n) { parameter_count_ = n; }
  // `model` may be null (the model failed to build); `quality` may be null.
  void record(const workloads::LoopResult& loop, std::vector<profiler::Event> events, const engine::nn::Module* model,
              const std::vector<collectors::Sample>& samples, const workloads::Quality* quality);

 private:
  store::Writer& writer_;
  int64_t run_;
  int64_t parameter_count_ = 0;
};

// Median and percentiles of a sample (linear interpolation between order statistics).
double percentile(std::vector<double> values, double p);

}  // namespace ts::cli
