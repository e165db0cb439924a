#include "engine/nn/parameter_gate.h"

namespace ts::engine::nn {

namespace {
thread_local ParameterGate* current_gate = nullptr;
}  // namespace

ParameterGateScope::ParameterGateScope(ParameterGate* gate) : saved_(current_gate) { current_gate = gate; }
ParameterGateScope::~ParameterGateScope() { current_gate = saved_; }

ParameterGate* current_parameter_gate() { return current_gate; }

}  // namespace ts::engine::nn
