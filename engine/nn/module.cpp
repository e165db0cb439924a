#include "engine/nn/module.h"

#include "profiler/tracer.h"

namespace ts::engine::nn {

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, c] : children_) c->train(on);
}

static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

void Module::set_path(const std::string& path) {
  path_ = path;
  path_id_ = profiler::Tracer::global().intern(path_);
  for (auto& [name, t] : params_) {
    t.set_name(join(path_, name));
    t.storage()->retag(vocabulary::Category::weights, path_);
  }
  for (auto& [name, t] : buffers_) {
    t.set_name(join(path_, name));
    t.storage()->retag(t.category(), path_);
  }
  for (auto& [name, c] : children_) c->set_path(join(path_, name));
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  t.set_requires_grad(true);
  t.set_name(join(path_, name));
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  t.set_name(join(path_, name));
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::collect_parameters(std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(t.name(), t);
  for (const auto& [_, c] : children_) c->collect_parameters(out);
}

void Module::collect_buffers(std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : buffers_) out.emplace_back(t.name(), t);
  for (const auto& [_, c] : children_) c->collect_buffers(out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_parameters(out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_buffers(out);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const auto& [_, t] : named_parameters()) n += t.numel();
  return n;
}

std::vector<const Module*> Module::modules() const {
  std::vector<const Module*> out{this};
  for (const auto& [_, c] : children_) {
    auto sub = c->modules();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

}  // namespace ts::engine::nn
