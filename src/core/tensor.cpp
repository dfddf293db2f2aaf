#include "core/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace zerodp {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

Tensor Tensor::empty(Shape shape, DType dtype, MemCategory c) {
  for (int64_t d : shape) ZDP_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  Tensor t;
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  t.storage_ = std::make_shared<Buffer>(bytes, c);
  t.data_ = t.storage_->data();
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, MemCategory c) {
  Tensor t = empty(std::move(shape), dtype, c);
  t.storage_->zero();
  return t;
}

Tensor Tensor::view(void* data, Shape shape, DType dtype) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  ZDP_CHECK(shape_numel(shape) == numel(), "cannot reshape {} to {}", shape_str(shape_),
            shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  ZDP_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
            "bad row slice [{}, {}) of {}", begin, end, shape_str(shape_));
  const int64_t row = numel() / (shape_[0] == 0 ? 1 : shape_[0]);
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

}  // namespace zerodp
