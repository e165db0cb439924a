#pragma once
// Process-wide CUDA objects (allocators, contexts, backends) are made on first use and never
// destroyed: at exit the CUDA runtime tears itself down in an order we do not control, and
// tensors held in other statics may be freed after any destructor of ours has run. The driver
// reclaims the device memory and handles when the process ends.
#include <memory>
#include <new>

namespace ts::engine::cuda {

template <class T>
class Immortal {
 public:
  template <class... Args>
  explicit Immortal(Args&&... args) {
    std::construct_at(reinterpret_cast<T*>(storage_), std::forward<Args>(args)...);
  }
  ~Immortal() = default;  // deliberately does not destroy the object
  Immortal(const Immortal&) = delete;
  Immortal& operator=(const Immortal&) = delete;
  T& get() { return *std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace ts::engine::cuda
