// Tensor: a shape and a dtype over contiguous row-major memory. Either it owns its storage (a
// ledger-accounted Buffer, shared between views), or it is a view into memory owned elsewhere, such
// as a named parameter inside a unit's flat buffer.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/memory.h"

namespace zerodp {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[768, 2304]"

class Tensor {
 public:
  Tensor() = default;

  // A new tensor owning uninitialised storage, accounted under `c`.
  static Tensor empty(Shape shape, DType dtype, MemCategory c);
  static Tensor zeros(Shape shape, DType dtype, MemCategory c);
  // A view of memory owned by someone else; the caller keeps it alive.
  static Tensor view(void* data, Shape shape, DType dtype);

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t ndim() const { return shape_.size(); }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }

  // The same memory under another shape with the same number of elements.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the first dimension.
  Tensor slice_rows(int64_t begin, int64_t end) const;

 private:
  std::shared_ptr<Buffer> storage_;  // null for views
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
};

}  // namespace zerodp
