#include "ckpt/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"

namespace zerodp::ckpt {

namespace {

using nlohmann::json;

// Limits on what a header may declare (docs/limits.md). Headers larger than kMaxHeaderBytes are
// refused as the safetensors library itself does (100 MB): the largest legitimate header, a model at
// the layer limit (model/gpt2_config.h), lists under a million tensors of about 100 bytes each. The
// header is a JSON object of objects holding arrays (depth 3), so nesting deeper than that is
// refused while parsing, before any value is built. kMaxTensors is the most any file zerodp reads
// can hold: a GPT-2 of 2^16 layers with its mask buffers (5 + 14·2^16), a checkpoint rank file
// (3 arrays per unit of that model). kMaxRank: GPT-2's tensors have at most 2 dimensions.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kMaxHeaderDepth = 3;
constexpr size_t kMaxTensors = size_t{1} << 20;
constexpr size_t kMaxRank = 8;

[[noreturn]] void malformed(const std::string& file, const std::string& what) {
  throw UsageError(fmt::format("'{}': malformed safetensors file: {}", file, what));
}
[[noreturn]] void malformed_tensor(const std::string& file, const std::string& tensor,
                                   const std::string& what) {
  throw UsageError(
      fmt::format("'{}': malformed safetensors file: tensor '{}': {}", file, describe_text(tensor), what));
}

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// safetensors dtype names zerodp reads; anything else is refused by name.
bool parse_st_dtype(const std::string& s, DType* out) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (s == dtype_safetensors_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

// A shape (or offsets) for messages: "[2, 3]" when it is a short array of scalars, else its
// description ("an array of 5000 elements").
std::string show_shape(const json& v) {
  if (!v.is_array() || v.size() > kMaxRank) return describe_json(v);
  std::string out = "[";
  for (const json& d : v) {
    if (d.is_structured()) return describe_json(v);
    out += (out.size() > 1 ? ", " : "") + describe_json(d);
  }
  return out.size() < 120 ? out + "]" : describe_json(v);
}

// Parses the header text within the limits above, refusing duplicate keys in any object (nlohmann
// would keep one of them silently).
json parse_header_json(const std::string& file, const char* begin, const char* end) {
  JsonLimits limits;
  limits.max_depth = kMaxHeaderDepth;
  limits.max_bytes = kMaxHeaderBytes;
  limits.refuse_duplicate_keys = true;
  const std::string source = fmt::format("'{}': malformed safetensors file: header", file);
  try {
    return parse_json(std::string_view(begin, static_cast<size_t>(end - begin)), source, limits);
  } catch (const UsageError& e) {
    // parse_json says "key NAME appears twice"; keep this reader's quoting of names ('NAME').
    std::string what = e.what();
    const std::string dup_prefix = source + ": key ", dup_suffix = " appears twice in one object";
    if (what.starts_with(dup_prefix) && what.ends_with(dup_suffix))
      what = fmt::format("{}: key '{}'{}", source,
                         what.substr(dup_prefix.size(), what.size() - dup_prefix.size() - dup_suffix.size()),
                         dup_suffix);
    throw UsageError(what);
  }
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

// ---- reader -----------------------------------------------------------------------------------

namespace {

// One tensor's header entry: its dtype, shape and byte range, checked against the data section.
TensorEntry read_tensor_entry(const std::string& file, const std::string& name, const json& entry,
                              const uint8_t* data, uint64_t data_size) {
  if (!entry.is_object())
    malformed_tensor(file, name, fmt::format("entry is not an object: {}", describe_json(entry)));
  TensorEntry t;
  t.name = name;

  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) malformed_tensor(file, name, "no \"dtype\"");
  if (!dtype_it->is_string())
    malformed_tensor(file, name, fmt::format("dtype is not a string: {}", describe_json(*dtype_it)));
  if (!parse_st_dtype(dtype_it->get<std::string>(), &t.dtype))
    malformed_tensor(
        file, name,
        fmt::format("dtype {} is not supported (zerodp reads F32, BF16 and F16)", describe_json(*dtype_it)));

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) malformed_tensor(file, name, "no \"shape\"");
  if (!shape_it->is_array())
    malformed_tensor(file, name, fmt::format("shape is not an array: {}", describe_json(*shape_it)));
  if (shape_it->size() > kMaxRank)
    malformed_tensor(file, name, fmt::format("shape has {} dimensions, over the {} allowed", shape_it->size(), kMaxRank));
  uint64_t numel = 1;
  for (const json& d : *shape_it) {
    if (!d.is_number_unsigned())
      malformed_tensor(
          file, name,
          fmt::format("shape {} holds {}, not a non-negative integer", show_shape(*shape_it), describe_json(d)));
    const uint64_t dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        mul_overflows(numel, dim, &numel))
      malformed_tensor(file, name, fmt::format("shape {} is too large", show_shape(*shape_it)));
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t nbytes = 0;
  if (mul_overflows(numel, dtype_size(t.dtype), &nbytes))
    malformed_tensor(file, name, fmt::format("shape {} is too large", show_shape(*shape_it)));

  const auto off_it = entry.find("data_offsets");
  if (off_it == entry.end()) malformed_tensor(file, name, "no \"data_offsets\"");
  if (!off_it->is_array() || off_it->size() != 2 || !(*off_it)[0].is_number_unsigned() ||
      !(*off_it)[1].is_number_unsigned())
    malformed_tensor(file, name,
                     fmt::format("data_offsets {} is not a pair of non-negative integers", show_shape(*off_it)));
  const uint64_t begin = (*off_it)[0].get<uint64_t>(), end = (*off_it)[1].get<uint64_t>();
  if (begin > end)
    malformed_tensor(file, name, fmt::format("data_offsets [{}, {}] run backwards", begin, end));
  if (end > data_size)
    malformed_tensor(
        file, name,
        fmt::format("data_offsets [{}, {}] run past the data section ({} bytes)", begin, end, data_size));
  if (end - begin != nbytes)
    malformed_tensor(
        file, name,
        fmt::format("data_offsets [{}, {}] hold {} bytes but shape {} in {} needs {}", begin, end,
                    end - begin, shape_str(t.shape), dtype_safetensors_name(t.dtype), nbytes));
  t.numel = static_cast<size_t>(numel);
  t.nbytes = static_cast<size_t>(nbytes);
  t.offset = static_cast<size_t>(begin);
  t.data = data + begin;
  return t;
}

}  // namespace

SafetensorsReader SafetensorsReader::open(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path);
  SafetensorsReader r = parse(file->data(), file->size(), path);
  r.file_ = std::move(file);
  return r;
}

SafetensorsReader SafetensorsReader::parse(const uint8_t* bytes, size_t size, std::string label) {
  SafetensorsReader r;
  r.label_ = std::move(label);
  const std::string& file = r.label_;

  if (size < 8) malformed(file, fmt::format("{} bytes, too short for the 8-byte header length", size));
  const uint64_t header_len = load_le64(bytes);
  if (header_len > size - 8)
    malformed(file,
              fmt::format("header length {} runs past the end of the file ({} bytes)", header_len, size));
  if (header_len > kMaxHeaderBytes)
    malformed(file,
              fmt::format("header length {} is over the {} bytes allowed", header_len, kMaxHeaderBytes));
  if (header_len < 2) malformed(file, fmt::format("header length {} cannot hold a JSON object", header_len));
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  if (text[0] != '{') malformed(file, "header does not start with '{'");
  const json header = parse_header_json(file, text, text + header_len);
  if (!header.is_object()) malformed(file, "header is not a JSON object");
  if (header.size() > kMaxTensors + 1)  // + __metadata__
    malformed(file, fmt::format("the header lists {} entries, over the {} tensors allowed (docs/limits.md)",
                                header.size(), kMaxTensors));
  r.tensors_.reserve(header.size());

  const uint8_t* data = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (entry.is_null()) continue;
      if (!entry.is_object()) malformed(file, fmt::format("__metadata__ is not an object: {}", describe_json(entry)));
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          malformed(file, fmt::format("__metadata__ value of '{}' is not a string: {}", describe_text(k),
                                      describe_json(v)));
        r.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    TensorEntry t = read_tensor_entry(file, name, entry, data, data_size);
    r.tensors_.push_back(std::move(t));
  }

  // The data section must be covered exactly, tensor after tensor: no overlap, no hole (a hole
  // would let a file hide other content).
  std::sort(r.tensors_.begin(), r.tensors_.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
  });
  uint64_t covered = 0;
  const TensorEntry* prev = nullptr;
  for (const TensorEntry& t : r.tensors_) {
    if (t.offset < covered)
      malformed_tensor(
          file, t.name,
          fmt::format("data_offsets [{}, {}] overlap tensor '{}' ([{}, {}])", t.offset, t.offset + t.nbytes,
                      describe_text(prev->name), prev->offset, prev->offset + prev->nbytes));
    if (t.offset > covered)
      malformed(file, fmt::format("bytes [{}, {}) of the data section belong to no tensor (before '{}')",
                                  covered, t.offset, describe_text(t.name)));
    covered = t.offset + t.nbytes;
    prev = &t;
  }
  if (covered != data_size)
    malformed(file, fmt::format("bytes [{}, {}) at the end of the data section belong to no tensor", covered,
                                data_size));

  for (size_t i = 0; i < r.tensors_.size(); ++i) r.index_.emplace(r.tensors_[i].name, i);
  return r;
}

const TensorEntry* SafetensorsReader::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorEntry& SafetensorsReader::at(std::string_view name) const {
  const TensorEntry* t = find(name);
  if (t == nullptr) throw UsageError(fmt::format("'{}': no tensor '{}'", label_, describe_text(name)));
  return *t;
}

void SafetensorsReader::read_f32(std::string_view name, size_t begin, size_t count, float* dst) const {
  read_f32(at(name), begin, count, dst);
}

void SafetensorsReader::read_f32(const TensorEntry& t, size_t begin, size_t count, float* dst) {
  ZDP_CHECK(begin <= t.numel && count <= t.numel - begin, "elements [{}, {}) of '{}' are outside its {}",
            begin, begin + count, t.name, t.numel);
  if (count == 0) return;  // an empty tensor's data may be null, which memcpy must never be given
  if (t.dtype == DType::kF32) {
    std::memcpy(dst, t.data + begin * 4, count * 4);  // memcpy: the data need not be 4-byte aligned
    return;
  }
  // 16-bit: copy a chunk to aligned scratch, then widen (exactly).
  constexpr size_t kChunk = 8192;
  uint16_t scratch[kChunk];
  const uint8_t* src = t.data + begin * 2;
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(kChunk, count - done);
    std::memcpy(scratch, src + done * 2, n * 2);
    convert(scratch, t.dtype, dst + done, DType::kF32, n);
    done += n;
  }
}

// ---- writer -----------------------------------------------------------------------------------

std::string safetensors_header(const std::vector<TensorSpec>& tensors, const Metadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string_view> seen;
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    ZDP_REQUIRE(t.name != "__metadata__", "a tensor may not be named __metadata__");
    ZDP_REQUIRE(seen.insert(t.name).second, "tensor '{}' is listed twice", t.name);
    for (int64_t d : t.shape)
      ZDP_REQUIRE(d >= 0, "tensor '{}' has a negative dimension in {}", t.name, shape_str(t.shape));
    const uint64_t nbytes = static_cast<uint64_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + text;
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorSpec> tensors, Metadata metadata)
    : file_(std::move(path)), specs_(std::move(tensors)) {
  const std::string header = safetensors_header(specs_, metadata);
  for (const TensorSpec& t : specs_) {
    data_bytes_ += static_cast<uint64_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
    end_.push_back(data_bytes_);
  }
  header_bytes_ = header.size();
  file_.write(header);
}

void SafetensorsWriter::write_bytes(const void* data, size_t n) {
  ZDP_CHECK(n <= data_bytes_ - written_, "'{}': {} more bytes than the {} of the declared tensors", path(),
            n - (data_bytes_ - written_), data_bytes_);
  file_.write(data, n);
  written_ += n;
}

void SafetensorsWriter::check_next(std::string_view name) const {
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name != name) continue;
    const uint64_t start =
        end_[i] - static_cast<uint64_t>(shape_numel(specs_[i].shape)) * dtype_size(specs_[i].dtype);
    ZDP_CHECK(start == written_, "'{}': tensor '{}' starts at byte {} of the data, but {} bytes are written",
              path(), name, start, written_);
    return;
  }
  ZDP_CHECK(false, "'{}': tensor '{}' is not in the header", path(), name);
}

void SafetensorsWriter::write_tensor(std::string_view name, const void* data) {
  check_next(name);
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) {
      write_bytes(data, static_cast<size_t>(shape_numel(specs_[i].shape)) * dtype_size(specs_[i].dtype));
      return;
    }
}

void SafetensorsWriter::write_tensor_f32(std::string_view name, const float* data) {
  check_next(name);
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) {
      write_f32(data, static_cast<size_t>(shape_numel(specs_[i].shape)));
      return;
    }
}

void SafetensorsWriter::write_f32(const float* data, size_t count) {
  constexpr size_t kChunk = 8192;
  uint16_t scratch[kChunk];
  size_t cur = 0;
  while (count > 0) {
    while (cur < specs_.size() && end_[cur] <= written_) ++cur;
    ZDP_CHECK(cur < specs_.size(), "'{}': {} fp32 values more than the declared tensors hold", path(), count);
    const TensorSpec& t = specs_[cur];
    const size_t es = dtype_size(t.dtype);
    ZDP_CHECK((end_[cur] - written_) % es == 0, "'{}': tensor '{}' is mid-element", path(), t.name);
    const size_t left_in_tensor = static_cast<size_t>((end_[cur] - written_) / es);
    if (t.dtype == DType::kF32) {
      const size_t n = std::min(count, left_in_tensor);
      write_bytes(data, n * 4);
      data += n;
      count -= n;
      continue;
    }
    const size_t n = std::min({count, left_in_tensor, kChunk});
    convert(data, DType::kF32, scratch, t.dtype, n);
    write_bytes(scratch, n * 2);
    data += n;
    count -= n;
  }
}

void SafetensorsWriter::commit() {
  if (written_ != data_bytes_) {
    size_t i = 0;
    while (i < specs_.size() && end_[i] <= written_) ++i;
    ZDP_CHECK(false, "'{}': commit after {} of {} data bytes (tensor '{}' is incomplete)", path(), written_,
              data_bytes_, i < specs_.size() ? specs_[i].name : std::string("?"));
  }
  file_.commit();
}

}  // namespace zerodp::ckpt
