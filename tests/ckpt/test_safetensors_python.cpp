// Against an independent implementation: scripts/test/safetensors_io.py writes a file with numpy
// (laid out by hand from the format's description, header unpadded) that zerodp must read, and
// checks a file zerodp wrote. Without a python3 that has numpy (scripts/setup/setup.sh installs
// python3-numpy) every test here FAILS, saying so: a missing reference never passes.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ckpt/safetensors.h"
#include "core/fs.h"

namespace zerodp::ckpt {
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A python3 that has numpy: $ZERODP_PYTHON, else Debian's /usr/bin/python3, else python3 on PATH.
std::string find_python() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ZERODP_PYTHON"); env && *env) candidates.push_back(env);
  candidates.push_back("/usr/bin/python3");
  candidates.push_back("python3");
  for (const auto& py : candidates)
    if (std::system((shell_quote(py) + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0) return py;
  return "";
}

std::string script_path() {
  if (const char* src = std::getenv("ZERODP_SOURCE_DIR"); src && *src)
    return std::string(src) + "/scripts/test/safetensors_io.py";
  return (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "scripts" / "test" /
          "safetensors_io.py")
      .string();
}

std::string python_temp_path(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_py_" + std::to_string(::getpid()) + "_" + name;
}

class SafetensorsPython : public ::testing::Test {
 protected:
  void SetUp() override {
    static const std::string python = find_python();  // looked up once per process
    python_ = python;
    ASSERT_FALSE(python_.empty())
        << "no python3 with numpy found ($ZERODP_PYTHON, /usr/bin/python3, python3 on PATH), so the "
           "independent safetensors implementation cannot run: install python3-numpy (scripts/setup/setup.sh) "
           "or set ZERODP_PYTHON to a python3 that has numpy.";
    ASSERT_TRUE(file_exists(script_path())) << script_path();
  }
  int run_script(const std::string& mode, const std::string& file) {
    const std::string cmd =
        shell_quote(python_) + " " + shell_quote(script_path()) + " " + mode + " " + shell_quote(file);
    return std::system(cmd.c_str());
  }
  std::string python_;
};

TEST_F(SafetensorsPython, ReadsAFileWrittenByNumpy) {
  const std::string path = python_temp_path("from_numpy.safetensors");
  ASSERT_EQ(run_script("write", path), 0);
  const SafetensorsReader r = SafetensorsReader::open(path);
  EXPECT_EQ(r.metadata(), (Metadata{{"n_layer", "2"}, {"format", "pt"}}));
  ASSERT_EQ(r.tensors().size(), 4u);
  EXPECT_EQ(r.at("a").dtype, DType::kF32);
  EXPECT_EQ(r.at("a").shape, (Shape{3, 5}));
  EXPECT_EQ(r.at("b").dtype, DType::kF16);
  EXPECT_EQ(r.at("c").dtype, DType::kBF16);
  EXPECT_EQ(r.at("c").shape, (Shape{2, 2, 3}));
  EXPECT_EQ(r.at("e").shape, (Shape{0, 4}));
  std::vector<float> v(15);
  r.read_f32("a", 0, 15, v.data());
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(v[i], 0.25f * static_cast<float>(i) - 1.5f) << i;
  r.read_f32("b", 0, 7, v.data());
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(v[i], 0.5f * (static_cast<float>(i) - 3.0f)) << i;
  r.read_f32("c", 0, 12, v.data());
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(v[i], 0.375f * static_cast<float>(i + 1)) << i;
  ::unlink(path.c_str());
}

TEST_F(SafetensorsPython, NumpyReadsAFileWeWrote) {
  const std::string path = python_temp_path("from_zerodp.safetensors");
  std::vector<float> a(15), b(7), c(12);
  for (size_t i = 0; i < 15; ++i) a[i] = 0.25f * static_cast<float>(i) - 1.5f;
  for (size_t i = 0; i < 7; ++i) b[i] = 0.5f * (static_cast<float>(i) - 3.0f);
  for (size_t i = 0; i < 12; ++i) c[i] = 0.375f * static_cast<float>(i + 1);
  {
    SafetensorsWriter w(path,
                        {{"a", DType::kF32, {3, 5}},
                         {"b", DType::kF16, {7}},
                         {"c", DType::kBF16, {2, 2, 3}},
                         {"e", DType::kF32, {0, 4}}},
                        {{"n_layer", "2"}, {"format", "pt"}});
    w.write_tensor_f32("a", a.data());
    w.write_tensor_f32("b", b.data());
    w.write_tensor_f32("c", c.data());
    w.write_tensor_f32("e", nullptr);
    w.commit();
  }
  EXPECT_EQ(run_script("check", path), 0);
  // And the check can fail: a file with one value changed is refused.
  {
    SafetensorsWriter w(path,
                        {{"a", DType::kF32, {3, 5}},
                         {"b", DType::kF16, {7}},
                         {"c", DType::kBF16, {2, 2, 3}},
                         {"e", DType::kF32, {0, 4}}},
                        {{"n_layer", "2"}, {"format", "pt"}});
    a[4] += 1.0f;
    w.write_tensor_f32("a", a.data());
    w.write_tensor_f32("b", b.data());
    w.write_tensor_f32("c", c.data());
    w.write_tensor_f32("e", nullptr);
    w.commit();
  }
  EXPECT_NE(run_script("check", path), 0);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace zerodp::ckpt
