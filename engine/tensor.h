#pragma once
// Tensor: a shape, a layout and shared storage from a category-tagged allocator, plus the
// autograd fields (requires_grad, grad, the node that produced it). fp32 only for now.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/layout.h"
#include "memprof/ledger.h"

namespace ts::engine {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape&);
// Sizes come from user input (a batch of 2^62 once wrapped around to a tiny buffer), so they are
// computed in checked arithmetic: a negative dimension throws std::invalid_argument, a count
// beyond int64 std::length_error, both naming the shape.
int64_t shape_numel(const Shape&);

// Number of floats the storage needs for `shape` in `layout` (padding included); checked.
int64_t storage_numel(const Shape& shape, const Layout& layout);
// Bytes of that storage; checked.
int64_t storage_bytes(const Shape& shape, const Layout& layout);

// A block of memory. Every allocation is reported to the memory ledger with its category and
// owner (the layer path in scope when it was made) and freed when the last tensor lets go.
class Storage {
 public:
  Storage(int64_t bytes, Device device, vocabulary::Category category, std::string_view owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  vocabulary::Category category() const { return category_; }
  // The buffer changes role (a computed gradient becomes a parameter's .grad): re-reported
  // to the ledger under the new category so the books stay exact.
  void retag(vocabulary::Category category, std::string_view owner);

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  Device device_;
  vocabulary::Category category_;
  uint64_t ledger_id_ = 0;
};

class Node;
class Tensor;
struct TensorImpl;

// Called when a leaf's gradient is final for this backward pass (data-parallel hooks here).
using GradReadyHook = std::function<void(Tensor&)>;

struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // leaves only; accumulated (+=) across uses
  std::shared_ptr<Node> grad_fn;     // non-leaves: the node that produced this tensor
  int output_index = 0;              // which output of grad_fn this is
  std::vector<GradReadyHook> hooks;
};

struct TensorImpl {
  Shape shape;
  Layout layout;
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in floats; views (reshape) share storage
  AutogradMeta autograd;
  std::string name;  // parameters: their full path, e.g. "layer3.2.conv2.weight"
};

class Tensor;
// `t` on `device`: `t` itself when it is already there, otherwise a copy in the plain layout
// and the current memory-category scope (host data to a device, or back). Meta gives shapes only.
Tensor to_device(const Tensor& t, Device device);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A new tensor in the current category/owner scope (see context.h) unless given. A host
  // allocation that fails throws cpu::OutOfMemoryError naming the bytes, shape, category and owner.
  static Tensor empty(const Shape& shape, Device device, Layout layout = Layout::plain());
  static Tensor empty(const Shape& shape, Device device, Layout layout, vocabulary::Category category);
  static Tensor zeros(const Shape& shape, Device device, Layout layout = Layout::plain());
  static Tensor full(const Shape& shape, float value, Device device);
  static Tensor from_vector(const Shape& shape, const std::vector<float>& values, Device device = Device::cpu());

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  int64_t dim() const { return static_cast<int64_t>(impl_->shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(impl_->shape); }
  int64_t storage_numel() const { return engine::storage_numel(impl_->shape, impl_->layout); }
  int64_t nbytes() const { return engine::storage_bytes(impl_->shape, impl_->layout); }
  Device device() const { return impl_->storage->device(); }
  const Layout& layout() const { return impl_->layout; }
  vocabulary::Category category() const { return impl_->storage->category(); }

  float* data() const;  // throws on meta tensors
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }

  // Logical values in row-major order of the shape (reorders blocked layouts).
  std::vector<float> to_vector() const;
  float item() const;

  bool requires_grad() const { return impl_->autograd.requires_grad; }
  Tensor& set_requires_grad(bool on);
  bool is_leaf() const { return impl_->autograd.grad_fn == nullptr; }
  Tensor grad() const;
  void zero_grad();  // drops the gradient; it is allocated again at the next accumulation
  const std::shared_ptr<Node>& grad_fn() const { return impl_->autograd.grad_fn; }
  int output_index() const { return impl_->autograd.output_index; }
  void add_grad_ready_hook(GradReadyHook hook);

  const std::string& name() const { return impl_->name; }
  Tensor& set_name(std::string n);

  // Shares storage; no autograd history.
  Tensor detach() const;
  // Same storage, new shape (plain layout only); not differentiable (ops::reshape is).
  Tensor view(const Shape& shape) const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

  // Runs backward from this (scalar) tensor. See autograd.h.
  void backward(bool create_graph = false) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace ts::engine
