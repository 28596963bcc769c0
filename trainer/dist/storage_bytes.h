// The bytes behind a set of tensors as the allocator holds them: each distinct storage once, at
// its size. A view counts its whole storage (a gradient that is a view of a bucket counts the
// bucket, once); a storage fsdp has freed counts 0. The memory report (param_bytes, grad_bytes,
// optimizer_bytes) is this sum, not numel x element size, so a free that frees nothing shows.
#pragma once

#include <cstdint>
#include <unordered_set>

#include <ATen/core/Tensor.h>

namespace hpc::train::dist {

class StorageBytes {
 public:
  StorageBytes& add(const at::Tensor& t) {
    if (!t.defined() || !t.has_storage()) return *this;
    const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    if (seen_.insert(impl).second) bytes_ += int64_t(impl->nbytes());
    return *this;
  }
  int64_t bytes() const { return bytes_; }

 private:
  std::unordered_set<const c10::StorageImpl*> seen_;
  int64_t bytes_ = 0;
};

}  // namespace hpc::train::dist
