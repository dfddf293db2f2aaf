// What the configuration tests share (test_config.cpp, test_ds_config.cpp): a JSON file that goes when
// the test ends, a runnable configuration, and the check that a warning names a key.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "train/train_config.h"
#include "train/usage_error.h"

namespace zerodp::train::config_test {

inline bool has_warning_about(const std::vector<std::string>& warnings, const std::string& key) {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const std::string& w) { return testing::contains(w, "'" + key + "'"); });
}

// A JSON file in the temporary directory, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("zerodp_test_config_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".json"))
                .string();
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline TrainConfig runnable() {
  TrainConfig c;
  c.init_path = "model.safetensors";
  c.data_path = "tokens.bin";
  return c;
}

}  // namespace zerodp::train::config_test
