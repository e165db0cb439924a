#pragma once
// Internal to engine/cpu/: the oneDNN engine/stream, the primitive cache and the helpers that
// translate between our Shape/Layout and oneDNN memory descriptors. With dnnl_primitives.h (the
// primitive descriptors, where oneDNN 2.x and 3.x differ), the thin layer through which the
// CPU backend reaches oneDNN.
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"

namespace ts::engine::cpu {

using dnnl::memory;
using md = dnnl::memory::desc;
using tag = dnnl::memory::format_tag;
constexpr auto f32 = dnnl::memory::data_type::f32;

memory::dims to_dims(const Shape& s);
// The memory descriptor of a tensor with this shape and layout (throws for combinations
// oneDNN cannot describe, e.g. a blocked layout on a rank other than 4).
md md_for(const Shape& shape, const Layout& layout);
// Which of our layouts `d` is (for a tensor of `shape`), if any.
std::optional<Layout> layout_of(const md& d, const Shape& shape);

// Builds cache keys: "conv_fwd|2,3,8,8|plain|..."
class Key {
 public:
  explicit Key(const char* kind) : s_(kind) {}
  Key& operator<<(int64_t v) {
    s_ += '|';
    s_ += std::to_string(v);
    return *this;
  }
  Key& operator<<(const Shape& sh) {
    s_ += '|';
    for (auto d : sh) {
      s_ += std::to_string(d);
      s_ += ',';
    }
    return *this;
  }
  Key& operator<<(const Layout& l) {
    s_ += '|';
    s_ += l.str();
    return *this;
  }
  Key& operator<<(const Conv2dParams& p) {
    return *this << p.stride_h << p.stride_w << p.pad_h << p.pad_w << p.dilation_h << p.dilation_w << p.groups;
  }
  Key& operator<<(const Pool2dParams& p) {
    return *this << p.kernel_h << p.kernel_w << p.stride_h << p.stride_w << p.pad_h << p.pad_w
                 << static_cast<int64_t>(p.count_include_pad);
  }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

// A reorder between two descriptors, created once (empty when they are equal).
struct Reorder {
  md from, to;
  std::optional<dnnl::reorder> prim;
  Reorder() = default;
  Reorder(const dnnl::engine& eng, const md& a, const md& b);
  bool needed() const { return prim.has_value(); }
};

// Thread safety (several threads run ops at once: a3c's learners): the engine, the cached
// primitives and the cache (under its mutex) are shared; each primitive runs on a stream made for
// that call, since oneDNN streams are not for concurrent use; scratchpads are per thread.
struct CpuBackend::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  mutable std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<void>> cache;
  size_t created = 0;

  // The cached entry for `key`, made by `make` on a miss. oneDNN fixes a primitive's thread
  // count when it is created, so the calling thread's OpenMP thread count is part of the key:
  // a learner thread running ops on one thread never executes a primitive made for the whole
  // machine (which would start a team of threads per learner), nor the other way round.
  template <class T>
  std::shared_ptr<T> get(const Key& key, const std::function<std::shared_ptr<T>()>& make) {
    const std::string k = key.str() + "|t" + std::to_string(omp_get_max_threads());
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = cache.find(k);
      if (it != cache.end()) return std::static_pointer_cast<T>(it->second);
    }
    std::shared_ptr<T> e = make();
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, inserted] = cache.emplace(k, e);
    if (inserted) ++created;
    return std::static_pointer_cast<T>(it->second);
  }

  // Runs a primitive and waits (a CPU stream is a small object: one per call).
  void run(const dnnl::primitive& p, const std::unordered_map<int, memory>& args) {
    dnnl::stream strm(eng);
    p.execute(strm, args);
    strm.wait();
  }
  // Reorders src (memory over `from`) into dst (over `to`). Equal descriptors have no
  // primitive (e.g. plain and channels-last with one channel: the same bytes): a plain copy.
  void reorder(const Reorder& r, void* src, void* dst) {
    if (!r.needed()) {
      if (src != dst) std::memcpy(dst, src, r.to.get_size());
      return;
    }
    memory a(r.from, eng, src), b(r.to, eng, dst);
    run(*r.prim, {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}});
  }
  // A reorder a primitive needs around itself (its inputs into the layout it computes in, its
  // output back): traced as an op of its own, `reorder`, nested in the op that needs it, so that
  // the roofline tells the primitive's time from its reorders'.
  void primitive_reorder(const Reorder& r, void* src, void* dst);
  // The cached reorder of a `shape` tensor between two layouts.
  std::shared_ptr<Reorder> layout_reorder(const Shape& shape, const Layout& from, const Layout& to);

  // The primitive attribute every primitive uses (user-managed scratchpad).
  static dnnl::primitive_attr attr() {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }
  // A scratchpad of at least `bytes` (a per-thread buffer kept between calls, category workspace).
  memory scratchpad(const md& d);
};

// A temporary buffer of `bytes` as a 1-D tensor (category workspace unless given).
Tensor temp_buffer(size_t bytes, vocabulary::Category category = vocabulary::Category::workspace);

// `t`'s data as a primitive wants it: as is, or reordered by `r` into `temp`.
void* prepare(CpuBackend::Impl& im, const Reorder& r, const Tensor& t, Tensor& temp);

CpuBackend::Impl& impl_of(CpuBackend& b);

}  // namespace ts::engine::cpu
