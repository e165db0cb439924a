#include "reports/op_class.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace ts::reports {

std::string op_class(std::string_view op_name) {
  std::string name(op_name);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // First match wins: "attention" before "linear" (attention's own matrix multiplies are its
  // own), "conv" before "backward_data" (a convolution's backward pieces are convolutions).
  static const std::pair<const char*, const char*> kByPart[] = {
      {"conv", "convolution"},
      {"attention", "attention"},
      {"lstm", "recurrent"},
      {"gru", "recurrent"},
      {"linear", "matrix multiply"},
      {"matmul", "matrix multiply"},
      {"norm_penalty", "element-wise"},
      {"norm", "normalisation"},
      {"pool", "pooling & resize"},
      {"upsample", "pooling & resize"},
      {"softmax", "softmax & loss"},
      {"entropy", "softmax & loss"},
      {"loss", "softmax & loss"},
      {"ctc", "softmax & loss"},
      {"smoothl1", "softmax & loss"},
      {"roi", "RoI"},
      {"layout", "layout & copies"},
      {"permute", "layout & copies"},
      {"reshape", "layout & copies"},
      {"concat", "layout & copies"},
      {"split", "layout & copies"},
      {"slice", "layout & copies"},
      {"index", "layout & copies"},
      {"reorder", "layout & copies"},  // oneDNN's layout conversions: 27-30% of resnet50's CPU time
      {"transpose", "layout & copies"},
      {"copy", "layout & copies"},
      {"relu", "element-wise"},
      {"tanh", "element-wise"},
      {"exp", "element-wise"},
      {"add", "element-wise"},
      {"mul", "element-wise"},
      {"scale", "element-wise"},
      {"sum", "element-wise"},
      {"mean", "element-wise"},
      {"sigmoid", "element-wise"},
      {"dropout", "element-wise"},
      {"gelu", "element-wise"},
  };
  for (const auto& [part, cls] : kByPart) {
    if (name.find(part) != std::string::npos) return cls;
  }
  return "other";
}

}  // namespace ts::reports
