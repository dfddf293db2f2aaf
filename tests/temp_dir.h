// For tests of every layer: a fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when the test ends, so that a test that writes files leaves nothing behind and sees nothing of
// another's.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace zerodp::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "zerodp") {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot make a temporary directory " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace zerodp::testing
