// safetensors: the writer and reader agree (all three dtypes, metadata, padding, zero-size tensors,
// streaming across tensor boundaries), an uncommitted writer leaves nothing, and every kind of
// malformed file is a UsageError naming the file and the tensor.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/fs.h"

namespace zerodp::ckpt {
namespace {

std::string temp_path(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return fmt::format("{}/zerodp_st_{}_{}", tmp && *tmp ? tmp : "/tmp", ::getpid(), name);
}

// A file from a header text (unpadded) and `data_bytes` bytes of data valued i % 251.
std::string raw_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i % 251));
  return out;
}

SafetensorsReader parse(const std::string& bytes, const std::string& label = "bad.safetensors") {
  return SafetensorsReader::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), label);
}

// Expects a UsageError whose message holds every one of `needles`.
void expect_malformed(const std::string& bytes, std::vector<std::string> needles) {
  needles.push_back("bad.safetensors");
  try {
    parse(bytes);
    ADD_FAILURE() << "parsed a malformed file; wanted an error mentioning " << needles[0];
  } catch (const UsageError& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(Safetensors, WriteThenReadAllDtypes) {
  const std::string path = temp_path("roundtrip.safetensors");
  std::vector<float> a(12), b(5), c(6);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.37f - 2.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) * 0.5f - 1.0f;  // exact in F16
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i + 1) * 0.375f;   // exact in BF16
  {
    SafetensorsWriter w(path,
                        {{"a", DType::kF32, {3, 4}},
                         {"b", DType::kF16, {5}},
                         {"empty", DType::kF32, {0, 7}},
                         {"c", DType::kBF16, {2, 1, 3}}},
                        {{"n_layer", "2"}, {"note", "hello \"quoted\""}});
    EXPECT_EQ(w.header_bytes() % 8, 0u);
    w.write_tensor_f32("a", a.data());
    w.write_tensor_f32("b", b.data());
    w.write_tensor_f32("empty", nullptr);
    w.write_tensor_f32("c", c.data());
    w.commit();
  }
  const SafetensorsReader r = SafetensorsReader::open(path);
  EXPECT_EQ(r.path(), path);
  ASSERT_EQ(r.tensors().size(), 4u);
  EXPECT_EQ(r.metadata().at("n_layer"), "2");
  EXPECT_EQ(r.metadata().at("note"), "hello \"quoted\"");
  EXPECT_EQ(r.at("a").dtype, DType::kF32);
  EXPECT_EQ(r.at("a").shape, (Shape{3, 4}));
  EXPECT_EQ(r.at("b").dtype, DType::kF16);
  EXPECT_EQ(r.at("c").dtype, DType::kBF16);
  EXPECT_EQ(r.at("c").shape, (Shape{2, 1, 3}));
  EXPECT_EQ(r.at("empty").numel, 0u);
  EXPECT_EQ(r.at("a").offset, 0u);
  EXPECT_EQ(r.at("b").offset, 48u);
  EXPECT_EQ(r.at("c").offset, 58u);
  std::vector<float> got(12);
  r.read_f32("a", 0, 12, got.data());
  EXPECT_EQ(got, a);
  got.assign(5, 0);
  r.read_f32("b", 0, 5, got.data());
  EXPECT_EQ(got, b);
  got.assign(6, 0);
  r.read_f32("c", 0, 6, got.data());
  EXPECT_EQ(got, c);
  // A slice alone.
  got.assign(3, 0);
  r.read_f32("a", 7, 3, got.data());
  EXPECT_EQ(got, std::vector<float>(a.begin() + 7, a.begin() + 10));
  r.read_f32("c", 2, 3, got.data());
  EXPECT_EQ(got, std::vector<float>(c.begin() + 2, c.begin() + 5));
  EXPECT_ANY_THROW(r.read_f32("a", 10, 3, got.data()));
  EXPECT_THROW(r.at("nope"), UsageError);
  EXPECT_EQ(r.find("nope"), nullptr);

  // The header is padded with spaces to a multiple of 8.
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 48 + 10 + 12);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));
  ::unlink(path.c_str());
}

TEST(Safetensors, RoundingToSixteenBitsIsToNearestEven) {
  const std::string path = temp_path("rounding.safetensors");
  const std::vector<float> v = {1.0f + 1.0f / 256 + 1.0f / 4096, 3.14159265f, -65504.0f, 1e-8f};
  {
    SafetensorsWriter w(path, {{"h", DType::kF16, {4}}, {"bf", DType::kBF16, {4}}});
    w.write_tensor_f32("h", v.data());
    w.write_tensor_f32("bf", v.data());
    w.commit();
  }
  const SafetensorsReader r = SafetensorsReader::open(path);
  std::vector<float> h(4), bf(4);
  r.read_f32("h", 0, 4, h.data());
  r.read_f32("bf", 0, 4, bf.data());
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(h[i], fp16_to_fp32(fp32_to_fp16(v[i])));
    EXPECT_EQ(bf[i], bf16_to_fp32(fp32_to_bf16(v[i])));
  }
  EXPECT_EQ(bf[0], 1.0f + 1.0f / 128);  // 1 + 2^-8 + 2^-12 rounds up to the next bf16
  ::unlink(path.c_str());
}

TEST(Safetensors, StreamingAcrossTensorBoundaries) {
  const std::string path = temp_path("stream.safetensors");
  std::vector<float> all(3 + 4 + 0 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<float>(i) + 0.5f;
  {
    SafetensorsWriter w(path, {{"x", DType::kF32, {3}},
                               {"y", DType::kBF16, {4}},
                               {"z0", DType::kF16, {0}},
                               {"z", DType::kF16, {5}}});
    w.write_f32(all.data(), 2);                    // inside x
    w.write_f32(all.data() + 2, 6);                // end of x, all of y, the empty z0, start of z
    w.write_f32(all.data() + 8, 4);                // rest of z
    EXPECT_ANY_THROW(w.write_f32(all.data(), 1));  // more than declared
    w.commit();
  }
  const SafetensorsReader r = SafetensorsReader::open(path);
  std::vector<float> got(12);
  r.read_f32("x", 0, 3, got.data());
  r.read_f32("y", 0, 4, got.data() + 3);
  r.read_f32("z", 0, 5, got.data() + 7);
  EXPECT_EQ(got, all);
  ::unlink(path.c_str());
}

TEST(Safetensors, UncommittedOrIncompleteWriterLeavesNoFile) {
  const std::string path = temp_path("never.safetensors");
  const float x[4] = {1, 2, 3, 4};
  {
    SafetensorsWriter w(path, {{"x", DType::kF32, {4}}, {"y", DType::kF32, {4}}});
    w.write_tensor_f32("x", x);
  }
  EXPECT_FALSE(file_exists(path));
  {
    SafetensorsWriter w(path, {{"x", DType::kF32, {4}}, {"y", DType::kF32, {4}}});
    EXPECT_ANY_THROW(w.write_tensor("y", x));  // out of order: x comes first
    w.write_tensor("x", x);
    EXPECT_ANY_THROW(w.commit());  // y is missing
  }
  EXPECT_FALSE(file_exists(path));
  EXPECT_THROW(SafetensorsWriter(path, {{"x", DType::kF32, {4}}, {"x", DType::kF32, {4}}}), UsageError);
  EXPECT_THROW(SafetensorsWriter(path, {{"__metadata__", DType::kF32, {1}}}), UsageError);
  EXPECT_THROW(SafetensorsWriter(path, {{"neg", DType::kF32, {-1, 2}}}), UsageError);
  EXPECT_FALSE(file_exists(path));
}

TEST(Safetensors, ValidMinimalFiles) {
  EXPECT_EQ(parse(raw_file("{}", 0)).tensors().size(), 0u);
  // Unpadded header, so the F32 data is not 4-byte aligned: still read right.
  const std::string f = raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 0) +
                        std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);
  const SafetensorsReader r = parse(f);
  float v[2];
  r.read_f32("t", 0, 2, v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  // A scalar (shape []) has one element; null metadata is allowed.
  EXPECT_EQ(
      parse(raw_file(R"({"__metadata__":null,"s":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}})", 2))
          .at("s")
          .numel,
      1u);
}

TEST(Safetensors, MalformedFilesNameTheFileAndTheTensor) {
  const std::string ok_entry = R"("dtype":"F32","shape":[2,2],"data_offsets":[0,16])";
  expect_malformed(std::string("\x05\x00\x00", 3), {"too short"});
  expect_malformed(raw_file("{}", 0).substr(0, 9), {"runs past the end"});
  {
    std::string f = raw_file("{}", 0);
    f[7] = '\x01';  // a header length of 2^56
    expect_malformed(f, {"runs past the end"});
  }
  expect_malformed(raw_file("[1,2]", 0), {"does not start with '{'"});
  expect_malformed(raw_file("{\"t\": ", 0), {"not valid JSON"});
  expect_malformed(raw_file("{} trailing", 0), {"not valid JSON"});
  expect_malformed(raw_file("{\"t\":{\"dtype\":\"F32\xff\"}}", 0), {"not valid JSON"});  // bad UTF-8
  expect_malformed(raw_file(R"({"t":[1]})", 0), {"'t'", "not an object"});
  expect_malformed(raw_file(R"({"t":{"shape":[2,2],"data_offsets":[0,16]}})", 16), {"'t'", "dtype"});
  expect_malformed(raw_file(R"({"t":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16),
                   {"'t'", "I64", "F32, BF16 and F16"});
  expect_malformed(raw_file(R"({"t":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", 8), {"'t'", "dtype"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","data_offsets":[0,16]}})", 16), {"'t'", "shape"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","shape":[-2,2],"data_offsets":[0,16]}})", 16),
                   {"'t'", "non-negative integer"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})", 16),
                   {"'t'", "non-negative integer"});
  expect_malformed(
      raw_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", 16),
      {"'t'", "too large"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","shape":[2,2]}})", 16), {"'t'", "data_offsets"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0]}})", 16),
                   {"'t'", "data_offsets"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[16,0]}})", 16),
                   {"'t'", "backwards"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 12),
                   {"'t'", "needs 16"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 15),
                   {"'t'", "past the data section"});
  expect_malformed(
      raw_file(R"({"t":{)" + ok_entry + R"(},"u":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
      {"overlap"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
                   {"belong to no tensor"});
  expect_malformed(raw_file(R"({"t":{)" + ok_entry + "}}", 20), {"belong to no tensor"});
  expect_malformed(raw_file(R"({"t":{)" + ok_entry + R"(},"t":{)" + ok_entry + "}}", 16), {"'t'", "twice"});
  expect_malformed(raw_file(R"({"t":{"dtype":"F32","dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 16),
                   {"'dtype'", "twice"});
  expect_malformed(raw_file(R"({"__metadata__":{"k":1}})", 0), {"__metadata__", "'k'"});
  expect_malformed(raw_file(R"({"__metadata__":[]})", 0), {"__metadata__"});
}

TEST(Safetensors, OpenErrorsNameThePath) {
  const std::string missing = temp_path("missing.safetensors");
  try {
    SafetensorsReader::open(missing);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos);
  }
  const std::string junk = temp_path("junk.safetensors");
  write_file_atomic(junk, std::string("not a safetensors file at all"));
  try {
    SafetensorsReader::open(junk);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(junk), std::string::npos);
  }
  ::unlink(junk.c_str());
}

}  // namespace
}  // namespace zerodp::ckpt
