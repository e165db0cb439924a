#include "workloads/workload.h"

#include <sstream>

#include "workloads/a3c/a3c.h"
#include "workloads/deepspeech2/deepspeech2.h"
#include "workloads/faster_rcnn/faster_rcnn.h"
#include "workloads/inception_v3/inception_v3.h"
#include "workloads/resnet50/resnet50.h"
#include "workloads/seq2seq/seq2seq.h"
#include "workloads/transformer/transformer.h"
#include "workloads/wgan/wgan.h"

namespace ts::workloads {

std::string table_number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

const Preset* WorkloadSpec::preset(const std::string& n) const {
  for (const auto& p : presets) {
    if (p.name == n) return &p;
  }
  return nullptr;
}

const std::vector<WorkloadSpec>& registry() {
  static const std::vector<WorkloadSpec> specs = {resnet50_spec(), inception_v3_spec(), seq2seq_spec(), transformer_spec(), faster_rcnn_spec(), deepspeech2_spec(), wgan_spec(), a3c_spec()};
  return specs;
}

const WorkloadSpec* find_workload(const std::string& name) {
  for (const auto& s : registry()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> out;
  for (const auto& s : registry()) out.push_back(s.name);
  return out;
}

}  // namespace ts::workloads
