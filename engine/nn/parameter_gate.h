#pragma once
// A gate a module's forward passes before it reads its own parameters. Data parallelism's
// cross-barrier scheduling (engine/optim/split_step.h) installs one on the training thread
// while the previous step's gradients are still being averaged: a layer waits only for its own
// parameters' gradients and updates them, so the front layers (whose gradients the priority
// schedule averages first) start computing while the back layers' are still in flight. Module::scope() calls the gate;
// a layer that reads parameters outside its own scope() defeats it (data parallelism detects that and fails the run).
namespace ts::engine::nn {

class Module;

class ParameterGate {
 public:
  virtual ~ParameterGate() = default;
  // Returns once `module`'s own parameters (not its children's) may be read.
  virtual void before_forward(const Module& module) = 0;
};

// Installs `gate` (nullptr: none) for this thread's forwards while the scope lives.
class ParameterGateScope {
 public:
  explicit ParameterGateScope(ParameterGate* gate);
  ~ParameterGateScope();
  ParameterGateScope(const ParameterGateScope&) = delete;
  ParameterGateScope& operator=(const ParameterGateScope&) = delete;

 private:
  ParameterGate* saved_;
};

// This thread's gate, or nullptr.
ParameterGate* current_parameter_gate();

}  // namespace ts::engine::nn
