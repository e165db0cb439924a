#include "engine/autograd.h"

#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "engine/backend.h"
#include "engine/context.h"
#include "engine/ops.h"
#include "profiler/tracer.h"

namespace ts::engine {

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!thread_context().grad_enabled) return false;
  for (const Tensor* t : inputs) {
    if (t && t->defined() && t->requires_grad()) return true;
  }
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!thread_context().grad_enabled) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

void connect(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs) {
  node->next_.clear();
  for (const Tensor* in : inputs) {
    Edge e;
    if (in && in->defined() && in->requires_grad()) {
      if (in->is_leaf()) {
        e.leaf = in->impl_ptr();
      } else {
        e.node = in->grad_fn();
        e.output_index = in->output_index();
      }
    }
    node->next_.push_back(std::move(e));
  }
  node->num_outputs_ = static_cast<int>(outputs.size());
  node->outputs_.clear();
  const auto& ctx = thread_context();
  node->owner_ = ctx.owner;
  node->owner_id_ = ctx.owner_id;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor* out = outputs[i];
    auto& meta = out->impl()->autograd;
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_index = static_cast<int>(i);
    node->outputs_.push_back({out->shape(), out->layout(), out->device()});
  }
}

namespace {

// Sums gradient contributions; the first one is kept as is (no copy).
void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  if (!slot.defined()) {
    slot = g;
  } else {
    slot = ops::add(slot, g);
  }
}

struct LeafState {
  int pending = 0;
  Tensor grad;  // sum of this pass's contributions
};

// The shared engine behind backward() and grad(). When `capture` is non-empty, gradients of
// those leaves/nodes are returned instead of accumulated into .grad().
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds, bool create_graph,
                                 const std::vector<Tensor>* capture) {
  if (!seeds.empty() && seeds.size() != roots.size()) throw std::invalid_argument("backward: one seed per root");

  // Pass 1: count consumers of every node output and of every leaf reachable from the roots.
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<TensorImpl*, LeafState> leaves;
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const Tensor& r : roots) {
    if (!r.defined() || !r.requires_grad()) throw std::invalid_argument("backward: a root does not require grad");
    if (r.is_leaf()) {
      leaves[r.impl()].pending += 1;
    } else if (seen.insert(r.grad_fn().get()).second) {
      stack.push_back(r.grad_fn().get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (e.node) {
        dependencies[e.node.get()] += 1;
        if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
      } else if (e.leaf) {
        leaves[e.leaf.get()].pending += 1;
      }
    }
  }

  // Captured non-leaf tensors: their node output's gradient is recorded when it is complete.
  std::unordered_map<Node*, std::vector<std::pair<int, size_t>>> captured_nodes;
  std::unordered_map<TensorImpl*, size_t> captured_leaves;
  std::vector<Tensor> result;
  if (capture) {
    result.resize(capture->size());
    for (size_t i = 0; i < capture->size(); ++i) {
      const Tensor& t = (*capture)[i];
      if (t.is_leaf()) {
        captured_leaves[t.impl()] = i;
      } else {
        captured_nodes[t.grad_fn().get()].push_back({t.output_index(), i});
      }
    }
  }

  // With a capture list, only nodes that lead to a captured tensor run, and each is told which
  // of its inputs lead there (post-order over the graph, iterative: graphs are deep).
  std::unordered_map<Node*, bool> useful;
  struct ClearMasks {  // even when a backward throws: a later pass must not see stale masks
    std::unordered_map<Node*, bool>& nodes;
    ~ClearMasks() {
      for (auto& entry : nodes) entry.first->set_needed_inputs({});
    }
  } clear_masks{useful};
  if (capture) {
    std::vector<std::pair<Node*, size_t>> walk;
    auto visit = [&](Node* n) {
      if (useful.emplace(n, captured_nodes.count(n) > 0).second) walk.push_back({n, 0});
    };
    for (const Tensor& r : roots) {
      if (!r.is_leaf()) visit(r.grad_fn().get());
    }
    while (!walk.empty()) {
      auto& [n, next] = walk.back();
      const auto& edges = n->next_edges();
      if (next < edges.size()) {
        Node* child = edges[next++].node.get();
        if (child) visit(child);
        continue;
      }
      std::vector<bool> needed(edges.size(), false);
      bool any = useful[n];
      for (size_t i = 0; i < edges.size(); ++i) {
        const Edge& e = edges[i];
        needed[i] = e.node ? useful[e.node.get()] : (e.leaf && captured_leaves.count(e.leaf.get()) > 0);
        any |= needed[i];
      }
      useful[n] = any;
      n->set_needed_inputs(std::move(needed));
      walk.pop_back();
    }
  }

  EnableGradScope grad_mode(create_graph);
  PassScope pass(profiler::Pass::backward);
  CategoryScope category(vocabulary::Category::activation_grads);

  std::unordered_map<Node*, std::vector<Tensor>> pending_grads;
  std::vector<std::shared_ptr<Node>> ready;

  auto deliver_leaf = [&](const std::shared_ptr<TensorImpl>& leaf_impl, const Tensor& g) {
    auto& st = leaves[leaf_impl.get()];
    accumulate(st.grad, g);
    if (--st.pending > 0) return;
    Tensor leaf(leaf_impl);
    if (capture) {
      auto it = captured_leaves.find(leaf_impl.get());
      if (it != captured_leaves.end()) result[it->second] = st.grad;
      return;
    }
    if (st.grad.defined()) {
      auto& meta = leaf_impl->autograd;
      if (!meta.grad) {
        // The computed buffer becomes the gradient: retag it rather than copy it, unless someone
        // else still holds it (the same gradient handed to two leaves, or saved elsewhere).
        Tensor g2 = st.grad;
        st.grad = Tensor();
        const bool sole_owner =
            g2.impl_ptr().use_count() <= 2 && g2.storage().use_count() == 1;  // g2 and the input list
        if (sole_owner && g2.is_leaf() && g2.layout() == leaf.layout() && g2.shape() == leaf.shape()) {
          g2.storage()->retag(vocabulary::Category::weight_grads, leaf_impl->name);
          meta.grad = g2.impl_ptr();
        } else {
          Tensor copy = Tensor::empty(leaf.shape(), leaf.device(), leaf.layout(), vocabulary::Category::weight_grads);
          backend_of(g2).copy(g2, copy);
          meta.grad = copy.impl_ptr();
        }
      } else {
        NoGradScope no_grad;
        backend_of(leaf).add_inplace(Tensor(meta.grad), st.grad, 1.0f);
      }
    }
    st.grad = Tensor();
    for (auto& hook : leaf_impl->autograd.hooks) hook(leaf);
  };

  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    Tensor seed;
    if (!seeds.empty() && seeds[i].defined()) {
      seed = seeds[i];
    } else {
      if (r.numel() != 1) throw std::invalid_argument("backward: a non-scalar root needs a seed gradient");
      seed = Tensor::full(r.shape(), 1.0f, r.device());
    }
    if (r.is_leaf()) {
      deliver_leaf(r.impl_ptr(), seed);
      continue;
    }
    Node* n = r.grad_fn().get();
    auto& slots = pending_grads[n];
    slots.resize(static_cast<size_t>(n->num_outputs()));
    accumulate(slots[static_cast<size_t>(r.output_index())], seed);
  }
  for (const Tensor& r : roots) {
    if (!r.is_leaf() && dependencies[r.grad_fn().get()] == 0) {
      bool dup = false;
      for (auto& q : ready) dup |= q.get() == r.grad_fn().get();
      if (!dup) ready.push_back(r.grad_fn());
    }
  }

  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    std::vector<Tensor> grads = std::move(pending_grads[node.get()]);
    pending_grads.erase(node.get());
    grads.resize(static_cast<size_t>(node->num_outputs()));

    if (capture) {
      auto it = captured_nodes.find(node.get());
      if (it != captured_nodes.end()) {
        for (auto [out, idx] : it->second) result[idx] = grads[static_cast<size_t>(out)];
      }
    }

    bool any = false;
    for (auto& g : grads) any |= g.defined();
    if (capture && !useful[node.get()]) any = false;  // leads to no captured tensor
    std::vector<Tensor> input_grads;
    if (any) {
      // Missing output gradients are zeros of the output's shape.
      for (size_t i = 0; i < grads.size(); ++i) {
        if (!grads[i].defined()) {
          const auto& info = node->outputs()[i];
          grads[i] = Tensor::zeros(info.shape, info.device, info.layout);
        }
      }
      OwnerScope owner(node->owner(), node->owner_id());
      // The node's whole backward is one op event (ConvBackward, BatchNormBackward, ...): backward
      // pieces that are ops nest inside it, and work a node does without ops is still timed.
      std::optional<OpScope> traced;
      if (op_tracing() && profiler::Tracer::global().enabled()) traced.emplace(op_name(node->name()));
      input_grads = node->backward(grads);
      if (input_grads.size() != node->next_edges().size()) {
        throw std::logic_error(node->name() + ": backward returned " + std::to_string(input_grads.size()) +
                               " gradients for " + std::to_string(node->next_edges().size()) + " inputs");
      }
    } else {
      input_grads.resize(node->next_edges().size());
    }
    grads.clear();
    if (!create_graph) node->release_saved();

    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (e.node) {
        auto& slots = pending_grads[e.node.get()];
        slots.resize(static_cast<size_t>(e.node->num_outputs()));
        accumulate(slots[static_cast<size_t>(e.output_index)], input_grads[i]);
        if (--dependencies[e.node.get()] == 0) ready.push_back(e.node);
      } else if (e.leaf) {
        deliver_leaf(e.leaf, input_grads[i]);
      }
    }
  }
  return result;
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds, bool create_graph) {
  run_backward(roots, seeds, create_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& seeds, bool create_graph) {
  return run_backward(outputs, seeds, create_graph, &inputs);
}

}  // namespace ts::engine
