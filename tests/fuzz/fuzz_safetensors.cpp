// libFuzzer target: zerodp::ckpt::SafetensorsReader::parse on arbitrary bytes (the header length,
// the JSON header, dtypes, shapes, offsets, metadata). An accepted file must hand out only tensors
// that lie inside the bytes it was given, and each must be readable whole as fp32 (which touches
// every byte of it, so ASan sees any tensor that pokes out).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ckpt/safetensors.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zerodp::fuzz::only_zerodp_errors("safetensors", [&] {
    const auto r = zerodp::ckpt::SafetensorsReader::parse(data, size, "fuzz.safetensors");
    std::vector<float> values;
    for (const auto& t : r.tensors()) {
      if (t.data < data || t.nbytes > size || t.data > data + (size - t.nbytes))
        zerodp::fuzz::property_failed("safetensors", "a tensor lies outside the file");
      if (t.numel * zerodp::dtype_size(t.dtype) != t.nbytes)
        zerodp::fuzz::property_failed("safetensors", "a tensor's byte count is not numel times its dtype's size");
      if (r.find(t.name) != &t) zerodp::fuzz::property_failed("safetensors", "find() misses a listed tensor");
      values.resize(t.numel);
      zerodp::ckpt::SafetensorsReader::read_f32(t, 0, t.numel, values.data());
    }
    for (const auto& [key, value] : r.metadata()) (void)key.size(), (void)value.size();
  });
  return 0;
}
