// safetensors files (docs/reference/files.md#safetensors): an 8-byte little-endian header length N, N bytes of a JSON
// object {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data section; offsets are relative to its start, tensors are row-major little-endian.
//
// The reader maps the file and validates all of it before handing anything out: a malformed file is
// a UsageError (exit 2) naming the file and, where there is one, the tensor. zerodp reads F32, BF16
// and F16; other dtypes are refused by name.
//
// The writer streams: it is given every tensor's name, dtype and shape and the metadata up front,
// writes the header at once, then takes the tensors' bytes in that order, so memory stays near one
// tensor. Nothing appears under the path until commit().
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/fs.h"
#include "core/tensor.h"

namespace zerodp::ckpt {

using Metadata = std::map<std::string, std::string>;

struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  size_t numel = 0;
  size_t nbytes = 0;
  size_t offset = 0;              // in the data section
  const uint8_t* data = nullptr;  // inside the mapping (not necessarily aligned to the dtype)
};

class SafetensorsReader {
 public:
  // An empty reader: no file, no tensors.
  SafetensorsReader() = default;
  // Maps and validates `path`.
  static SafetensorsReader open(const std::string& path);
  // Validates `size` bytes at `bytes` (kept alive by the caller) as a file named `label`.
  static SafetensorsReader parse(const uint8_t* bytes, size_t size, std::string label);

  const std::string& path() const { return label_; }
  const Metadata& metadata() const { return metadata_; }
  // Every tensor, in the order of their data.
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const TensorEntry* find(std::string_view name) const;
  // UsageError naming the file when there is no such tensor.
  const TensorEntry& at(std::string_view name) const;

  // dst[k] = element (begin + k) of tensor `name` as fp32, for k < count (widened exactly from
  // BF16/F16). The range must lie inside the tensor.
  void read_f32(std::string_view name, size_t begin, size_t count, float* dst) const;
  static void read_f32(const TensorEntry& t, size_t begin, size_t count, float* dst);

 private:
  std::shared_ptr<MappedFile> file_;  // null when parsing caller-owned bytes
  std::string label_;
  Metadata metadata_;
  std::vector<TensorEntry> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

class SafetensorsWriter {
 public:
  // Validates the specs (names unique and not "__metadata__", shapes non-negative), lays the
  // tensors out back to back in the given order, and writes the header (padded with spaces so
  // the data section starts at a multiple of 8 bytes).
  SafetensorsWriter(std::string path, std::vector<TensorSpec> tensors, Metadata metadata = {});

  // Appends raw bytes in the declared dtypes; they may cross tensor boundaries. More bytes than
  // the tensors hold is an error.
  void write_bytes(const void* data, size_t n);
  // The next tensor, whole: `name` must be the next one; `data` holds its bytes in its dtype.
  void write_tensor(std::string_view name, const void* data);
  // The next tensor from fp32 values, converted to its declared dtype (in chunks).
  void write_tensor_f32(std::string_view name, const float* data);
  // Appends `count` fp32 values of the stream (any tensor boundaries), converted to each tensor's dtype.
  void write_f32(const float* data, size_t count);
  // Publishes the file; every tensor must have been written in full.
  void commit();

  const std::string& path() const { return file_.path(); }
  uint64_t header_bytes() const { return header_bytes_; }  // 8 + N
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  void check_next(std::string_view name) const;

  AtomicFile file_;
  std::vector<TensorSpec> specs_;
  std::vector<size_t> end_;  // end offset of each tensor in the data section
  uint64_t header_bytes_ = 0;
  uint64_t data_bytes_ = 0;
  uint64_t written_ = 0;  // bytes of the data section written so far
};

// The header (8-byte length and padded JSON) for tensors laid out back to back in this order.
std::string safetensors_header(const std::vector<TensorSpec>& tensors, const Metadata& metadata);

}  // namespace zerodp::ckpt
