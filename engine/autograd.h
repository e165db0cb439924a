#pragma once
// Define-by-run autograd. Each differentiable op records a Node that knows how to turn the
// gradients of its outputs into gradients of its inputs. Those backward pieces are written
// with ops themselves, so running backward with create_graph records a second graph and
// second-order gradients work where an op's backward pieces are differentiable.
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "profiler/event.h"

namespace ts::engine {

// Where an input's gradient goes: a node's output, or a leaf tensor that accumulates it.
struct Edge {
  std::shared_ptr<Node> node;  // producer of a non-leaf input
  int output_index = 0;
  std::shared_ptr<TensorImpl> leaf;  // leaf that requires grad
  bool valid() const { return node != nullptr || leaf != nullptr; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node() = default;

  // grads[i] is the gradient of output i (undefined when no gradient reached it). Returns one
  // gradient per input, in the order the inputs were connected (undefined = no gradient).
  virtual std::vector<Tensor> backward(const std::vector<Tensor>& grads) = 0;
  virtual std::string name() const = 0;
  // Frees what was saved for backward, once backward has used it.
  virtual void release_saved() {}

  const std::vector<Edge>& next_edges() const { return next_; }
  int num_outputs() const { return num_outputs_; }
  const std::string* owner() const { return owner_; }
  profiler::StringId owner_id() const { return owner_id_; }
  // Shape/layout/device of each output, so that a missing gradient can be made as zeros.
  struct OutputInfo {
    Shape shape;
    Layout layout;
    Device device;
  };
  const std::vector<OutputInfo>& outputs() const { return outputs_; }
  // Whether the running backward wants input i's gradient: grad() of a few tensors (WGAN-GP's
  // penalty asks only for the input's) lets nodes skip the others, e.g. the weight gradients.
  bool input_needed(size_t i) const { return needed_.empty() || needed_[i]; }
  void set_needed_inputs(std::vector<bool> needed) { needed_ = std::move(needed); }

 private:
  friend void connect(const std::shared_ptr<Node>&, const std::vector<const Tensor*>&, const std::vector<Tensor*>&);
  std::vector<Edge> next_;
  std::vector<OutputInfo> outputs_;
  std::vector<bool> needed_;  // empty: all
  int num_outputs_ = 0;
  const std::string* owner_ = nullptr;
  profiler::StringId owner_id_ = 0;
};

// True when autograd is recording and any input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Records `node` as the producer of `outputs` with edges to `inputs` (undefined or non-grad
// inputs get invalid edges). Marks outputs as requiring grad. Captures the owner in scope.
void connect(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs);

// Runs backward from `roots` seeded with `seeds` (ones when seeds are empty and roots are
// scalars). Leaf gradients accumulate into .grad(); each leaf's hooks fire once its gradient
// is final. With create_graph the backward ops are themselves recorded.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds = {}, bool create_graph = false);

// Gradients of `outputs` with respect to `inputs` without touching .grad() (for gradient
// penalties and the gradient checker). Undefined where an input is unreachable.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& seeds = {}, bool create_graph = false);

}  // namespace ts::engine
