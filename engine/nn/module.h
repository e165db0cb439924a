#pragma once
// Modules hold parameters and buffers under a path that reads like the paper
// ("layer3.2.conv2"). Entering a module's scope tags the memory it allocates and the ops it
// runs with that path, which is what the per-layer profiles and memory tables show.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/context.h"
#include "engine/nn/parameter_gate.h"
#include "engine/tensor.h"

namespace ts::engine::nn {

class Module {
 public:
  explicit Module(Device device) : device_(device) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& path() const { return path_; }
  Device device() const { return device_; }
  bool training() const { return training_; }
  void train(bool on = true);

  // Depth-first, in registration order, with full names ("layer1.0.conv1.weight").
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  int64_t parameter_count() const;
  // This module's own parameters (its children's not included), as registered.
  const std::vector<std::pair<std::string, Tensor>>& own_parameters() const { return params_; }
  // Every module below this one (itself first), for per-layer tables.
  std::vector<const Module*> modules() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

  // Sets this module's path (and its children's), re-tagging what they own.
  void set_path(const std::string& path);

 protected:
  Tensor& register_parameter(const std::string& name, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    m->set_path(path_.empty() ? name : path_ + "." + name);
    return m;
  }
  // RAII scope for forward(): owner = this module's path. Passes this thread's parameter gate
  // first (parameter_gate.h), so every forward must open it before reading its parameters.
  OwnerScope scope() const {
    if (ParameterGate* gate = current_parameter_gate()) gate->before_forward(*this);
    return OwnerScope(&path_, path_id_);
  }

 private:
  void collect_parameters(std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_buffers(std::vector<std::pair<std::string, Tensor>>& out) const;

  Device device_;
  std::string path_;
  profiler::StringId path_id_ = 0;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace ts::engine::nn
