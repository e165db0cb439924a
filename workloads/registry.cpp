#include "workloads/workload.h"

#include <iomanip>
#include <sstream>
#include <stdexcept>

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

std::string table_exponent(double v) {
  // table_number's six significant digits in scientific form, without the mantissa's trailing
  // zeros or the exponent's plus sign and zero padding (1.00000e-04 -> 1e-4).
  std::ostringstream o;
  o << std::scientific << std::setprecision(5) << v;
  const std::string s = o.str();
  const size_t e = s.find('e');
  std::string mantissa = s.substr(0, e);
  if (mantissa.find('.') != std::string::npos) {
    mantissa.erase(mantissa.find_last_not_of('0') + 1);
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  const int exponent = std::stoi(s.substr(e + 1));
  return mantissa + "e" + std::to_string(exponent);
}

std::string table_list(std::span<const int64_t> values) {
  std::string s;
  for (const int64_t v : values) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

std::string table_list(std::span<const float> values) {
  std::string s;
  for (const float v : values) s += (s.empty() ? "" : ",") + table_number(v);
  return s;
}

std::string grouped_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  for (auto i = static_cast<int64_t>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return (n < 0 ? "-" : "") + digits;
}

const Preset* WorkloadSpec::preset(const std::string& n) const {
  for (const auto& p : presets) {
    if (p.name == n) return &p;
  }
  return nullptr;
}

int64_t WorkloadSpec::batch_of(const std::string& preset_name, std::optional<int64_t> batch) const {
  const Preset* p = preset(preset_name);
  if (!p) {
    std::string names;
    for (const auto& known : presets) {
      if (!names.empty()) names += ", ";
      names += known.name;
    }
    throw std::invalid_argument(name + " has no preset '" + preset_name + "' (" + names + ")");
  }
  if (batch && *batch <= 0) throw std::invalid_argument(name + ": batch size must be positive");
  return batch.value_or(p->default_batch);
}

std::unique_ptr<Workload> WorkloadSpec::create(WorkloadConfig config) const {
  config.batch = batch_of(config.preset, config.batch);
  return build(config);
}

int64_t WorkloadSpec::parameter_count(const std::string& preset_name) const {
  if (count_parameters) return count_parameters(preset_name);
  WorkloadConfig wc;
  wc.preset = preset_name;
  wc.device = engine::Device::meta();
  return create(wc)->model().parameter_count();
}

const std::vector<WorkloadSpec>& registry() {
  static const std::vector<WorkloadSpec> specs = {resnet50_spec(),    inception_v3_spec(), seq2seq_spec(),
                                                  transformer_spec(), faster_rcnn_spec(),  deepspeech2_spec(),
                                                  wgan_spec(),        a3c_spec()};
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
