#pragma once
// The class of a stored op (by its name), for the report's "time by op class": where a step's
// time goes at the level a roofline speaks of (convolutions and matrix multiplies against the
// machine's peak, element-wise and layout work against its memory bandwidth).
#include <string>
#include <string_view>

namespace ts::reports {

// "convolution", "matrix multiply", "recurrent", "attention", "normalisation", "pooling & resize",
// "element-wise", "softmax & loss", "layout & copies", "RoI", "other". An autograd node (its name
// ending in "Backward") is in the class of the op it differentiates.
std::string op_class(std::string_view op_name);

}  // namespace ts::reports
