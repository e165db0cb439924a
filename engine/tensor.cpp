#include "engine/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/context.h"
#include "engine/cpu/host_allocator.h"
#include "engine/device_memory.h"

namespace ts::engine {

std::string Device::str() const {
  switch (type) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::meta: return "meta";
    case DeviceType::cuda: return "cuda:" + std::to_string(index);
  }
  return "?";
}

Device parse_device(std::string_view s) {
  if (s == "cpu") return Device::cpu();
  if (s == "meta") return Device::meta();
  if (s == "cuda") return {DeviceType::cuda, 0};
  if (s.starts_with("cuda:")) {
    const std::string idx(s.substr(5));
    char* end = nullptr;
    const long v = std::strtol(idx.c_str(), &end, 10);
    if (!idx.empty() && end && *end == '\0' && v >= 0) return {DeviceType::cuda, static_cast<int>(v)};
  }
  throw std::invalid_argument("unknown device '" + std::string(s) + "' (expected cpu, cuda or cuda:N)");
}

std::string Layout::str() const {
  switch (kind) {
    case Kind::plain: return "plain";
    case Kind::channels_last: return "channels_last";
    case Kind::channel_blocked: return "blocked" + std::to_string(block);
    case Kind::weights_blocked: return "OIhw" + std::to_string(block) + "i" + std::to_string(block) + "o";
  }
  return "?";
}

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ']';
  return o.str();
}

namespace {

// a * b, or std::length_error naming the shape when the product leaves int64.
// `what` is a literal: this runs for every elementwise op, no string is built unless it throws.
int64_t checked_product(int64_t a, int64_t b, const Shape& shape, const char* what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) {
    throw std::length_error("shape " + shape_str(shape) + ": its " + std::string(what) +
                            " overflows a 64-bit integer (the largest is 9223372036854775807)");
  }
  return product;
}

// Negative dimensions are refused; with a zero dimension there are no elements at all,
// whatever the others (so a product that would overflow on the way still gives 0).
bool check_dimensions(const Shape& shape) {
  bool any_zero = false;
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_str(shape));
    any_zero = any_zero || d == 0;
  }
  return any_zero;
}

}  // namespace

int64_t shape_numel(const Shape& s) {
  if (check_dimensions(s)) return 0;
  int64_t n = 1;
  for (auto d : s) n = checked_product(n, d, s, "element count");
  return n;
}

int64_t storage_numel(const Shape& shape, const Layout& layout) {
  if (layout.kind == Layout::Kind::weights_blocked) {
    // No padding: elementwise code (optimizers, gradient exchange) may treat the storage as flat.
    if (shape.size() != 4 || layout.block <= 0 || shape[0] % layout.block != 0 || shape[1] % layout.block != 0)
      throw std::logic_error("weights-blocked layout needs [O, I, kh, kw] with O and I multiples of its block, got " +
                             shape_str(shape) + " and " + layout.str());
    return shape_numel(shape);
  }
  if (layout.kind != Layout::Kind::channel_blocked) return shape_numel(shape);
  if (shape.size() < 2 || layout.block <= 0)
    throw std::logic_error("channel-blocked layout needs rank >= 2 and a block");
  if (check_dimensions(shape)) return 0;
  // Channels padded up to a whole number of blocks: ceil(C / block) * block, without C + block - 1.
  const int64_t block = layout.block;
  const int64_t channel_blocks = shape[1] / block + (shape[1] % block != 0 ? 1 : 0);
  int64_t n = checked_product(channel_blocks, block, shape, "channel count padded to whole blocks");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i != 1) n = checked_product(n, shape[i], shape, "element count in a channel-blocked layout");
  }
  return n;
}

int64_t storage_bytes(const Shape& shape, const Layout& layout) {
  return checked_product(storage_numel(shape, layout), static_cast<int64_t>(sizeof(float)), shape, "byte count");
}

Storage::Storage(int64_t bytes, Device device, vocabulary::Category category, std::string_view owner)
    : bytes_(bytes), device_(device), category_(category) {
  if (bytes < 0) throw std::invalid_argument("negative allocation size");
  switch (device.type) {
    case DeviceType::meta: return;  // shapes only
    case DeviceType::cpu: {
      data_ = cpu::host_allocate(static_cast<size_t>(bytes));
      ledger_id_ = memprof::Ledger::global().on_alloc(bytes, category, owner);
      return;
    }
    case DeviceType::cuda: {
      data_ = memory_for(device).allocate(bytes, category, owner);
      ledger_id_ = memprof::Ledger::global().on_alloc(bytes, category, owner);
      return;
    }
  }
}

Storage::~Storage() {
  if (ledger_id_) memprof::Ledger::global().on_free(ledger_id_);
  if (device_.is_cpu()) cpu::host_free(data_, static_cast<size_t>(bytes_));
  if (device_.type == DeviceType::cuda) memory_for(device_).release(data_);
}

void Storage::retag(vocabulary::Category category, std::string_view owner) {
  category_ = category;
  if (!ledger_id_) return;
  memprof::Ledger::global().on_free(ledger_id_);
  ledger_id_ = memprof::Ledger::global().on_alloc(bytes_, category, owner);
}

static std::string_view current_owner() {
  const auto* o = thread_context().owner;
  return o ? std::string_view(*o) : std::string_view();
}

Tensor Tensor::empty(const Shape& shape, Device device, Layout layout) {
  return empty(shape, device, layout, thread_context().category);
}

Tensor Tensor::empty(const Shape& shape, Device device, Layout layout, vocabulary::Category category) {
  const int64_t bytes = storage_bytes(shape, layout);  // throws on negative dimensions and overflow
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->layout = layout;
  const std::string_view owner = current_owner();
  try {
    impl->storage = std::make_shared<Storage>(bytes, device, category, owner);
  } catch (const cpu::OutOfMemoryError& e) {
    // The allocator knows the bytes; here is what they were for.
    std::string live;
    const memprof::Snapshot now = memprof::Ledger::global().current();
    for (vocabulary::Category c : vocabulary::kAllCategories) {
      const int64_t b = now.bytes[static_cast<size_t>(c)];
      if (b > 0)
        live += std::string(vocabulary::to_string(c)) + " " + cpu::format_host_bytes(static_cast<size_t>(b)) + ", ";
    }
    throw cpu::OutOfMemoryError("out of memory for a tensor of shape " + shape_str(shape) + " (category " +
                                    std::string(vocabulary::to_string(category)) + ", owner '" +
                                    std::string(owner.empty() ? std::string_view("(top level)") : owner) +
                                    "'): " + e.what() + ". Live tensors: " + (live.empty() ? "none, " : live) +
                                    "total " + cpu::format_host_bytes(static_cast<size_t>(now.total)),
                                e.requested_bytes());
  }
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, Device device, Layout layout) {
  Tensor t = empty(shape, device, layout);
  if (device.is_cpu()) std::memset(t.data(), 0, static_cast<size_t>(t.nbytes()));
  if (device.type == DeviceType::cuda) memory_for(device).zero(t.data(), static_cast<size_t>(t.nbytes()));
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  Tensor t = empty(shape, device);
  if (!device.is_meta()) backend_for(device).fill(t, value);
  return t;
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values, Device device) {
  if (static_cast<int64_t>(values.size()) != shape_numel(shape)) {
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) + " values for shape " +
                                shape_str(shape));
  }
  Tensor t = empty(shape, device);
  if (device.type == DeviceType::cuda) {
    memory_for(device).copy_from_host(t.data(), values.data(), values.size() * sizeof(float));
    return t;
  }
  if (!device.is_cpu()) throw std::invalid_argument("from_vector: no host data path for device " + device.str());
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(float));  // memcpy(null, ...) is UB
  return t;
}

int64_t Tensor::size(int64_t d) const {
  const int64_t r = dim();
  if (d < 0) d += r;
  if (d < 0 || d >= r)
    throw std::out_of_range("dimension " + std::to_string(d) + " of a rank-" + std::to_string(r) + " tensor");
  return impl_->shape[static_cast<size_t>(d)];
}

float* Tensor::data() const {
  if (device().is_meta()) throw std::logic_error("meta tensors have no data");
  return static_cast<float*>(impl_->storage->data()) + impl_->offset;
}

std::vector<float> Tensor::to_vector() const {
  if (device().type == DeviceType::cuda) {
    // Waits for the work queued on the device's stream.
    Tensor plain = layout().is_plain() ? *this : backend_of(*this).to_layout(*this, Layout::plain());
    std::vector<float> v(static_cast<size_t>(numel()));
    memory_for(device()).copy_to_host(v.data(), plain.data(), v.size() * sizeof(float));
    return v;
  }
  if (!device().is_cpu()) throw std::logic_error("to_vector: only cpu tensors");
  Tensor plain = layout().is_plain() ? *this : backend_of(*this).to_layout(*this, Layout::plain());
  const float* p = plain.data();
  return std::vector<float>(p, p + numel());
}

float Tensor::item() const {
  if (numel() != 1) throw std::logic_error("item() on a tensor of shape " + shape_str(shape()));
  return to_vector()[0];
}

Tensor& Tensor::set_requires_grad(bool on) {
  if (!is_leaf() && !on) throw std::logic_error("cannot clear requires_grad on a non-leaf tensor; use detach()");
  impl_->autograd.requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return impl_->autograd.grad ? Tensor(impl_->autograd.grad) : Tensor(); }

void Tensor::zero_grad() { impl_->autograd.grad.reset(); }

void Tensor::add_grad_ready_hook(GradReadyHook hook) { impl_->autograd.hooks.push_back(std::move(hook)); }

Tensor& Tensor::set_name(std::string n) {
  impl_->name = std::move(n);
  return *this;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = impl_->shape;
  impl->layout = impl_->layout;
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  return Tensor(std::move(impl));
}

Tensor Tensor::view(const Shape& shape) const {
  if (!layout().is_plain()) throw std::logic_error("view() needs a plain layout; use ops::reshape");
  if (shape_numel(shape) != numel()) {
    throw std::invalid_argument("view: cannot view " + shape_str(this->shape()) + " as " + shape_str(shape));
  }
  Tensor t = detach();
  t.impl_->shape = shape;
  return t;
}

void Tensor::backward(bool create_graph) const { engine::backward({*this}, {}, create_graph); }

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  if (device.is_meta()) return Tensor::empty(t.shape(), device);
  return Tensor::from_vector(t.shape(), t.to_vector(), device);
}

}  // namespace ts::engine
