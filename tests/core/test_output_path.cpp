// check_output_path (core/output_path.h): every kind of output refused, with the flag and the path named,
// when its parent is missing, when the path is of the wrong kind, or when the directory refuses a file;
// accepted (and left as it was: the probe file is gone) otherwise. A read-only mount is covered by
// tests/cli/outputs_tests.py, which can make one.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/output_path.h"
#include "error_message.h"
#include "temp_dir.h"

namespace zerodp {
namespace {

namespace fs = std::filesystem;
using zerodp::testing::error_message;

class OutputPathTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_ / name; }
  void touch(const std::string& name) const { std::ofstream(path(name)) << "x"; }
  size_t entries() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(root_)) ++n;
    return n;
  }
  std::string refusal(const std::string& p, OutputKind kind, const char* flag = "--out") const {
    return error_message<UsageError>([&] { check_output_path(p, kind, flag); });
  }

  zerodp::testing::TempDir tmp_{"zerodp_out"};
  const std::string& root_ = tmp_.path();
};

TEST_F(OutputPathTest, AcceptsWhatCanBeWrittenAndLeavesNothingBehind) {
  touch("old.safetensors");
  fs::create_directory(path("model"));
  EXPECT_NO_THROW(check_output_path(path("new.safetensors"), OutputKind::kFile, "--out"));
  EXPECT_NO_THROW(check_output_path(path("old.safetensors"), OutputKind::kFile, "--out"));
  EXPECT_NO_THROW(check_output_path(path("model"), OutputKind::kDirectory, "--out"));
  EXPECT_NO_THROW(check_output_path(path("model/"), OutputKind::kDirectory, "--out"));
  EXPECT_NO_THROW(check_output_path(path("fresh"), OutputKind::kDirectory, "--out"));
  EXPECT_NO_THROW(check_output_path(path("a/b/c"), OutputKind::kDirectoryTree, "--save-dir"));
  EXPECT_NO_THROW(check_output_path(path("model"), OutputKind::kExistingDirectory, "--nvme-path"));
  EXPECT_NO_THROW(check_output_path(path("shards"), OutputKind::kPrefix, "--out-prefix"));
  EXPECT_NO_THROW(check_output_path("", OutputKind::kFile, "--metrics"));  // no output
  EXPECT_EQ(entries(), 2u);  // the two made here; no probe file, no directory created
  EXPECT_FALSE(fs::exists(path("fresh")));
  EXPECT_FALSE(fs::exists(path("a")));
}

TEST_F(OutputPathTest, RefusesAMissingParentNamingTheFlag) {
  const std::string p = path("missing/final.safetensors");
  const std::string e = refusal(p, OutputKind::kFile, "--metrics");
  EXPECT_NE(e.find("--metrics '" + p + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("the directory '" + path("missing") + "' does not exist"), std::string::npos) << e;
  EXPECT_NE(refusal(path("missing/model"), OutputKind::kDirectory).find("does not exist"), std::string::npos);
  EXPECT_NE(refusal(path("missing/run"), OutputKind::kPrefix, "--out-prefix").find("--out-prefix"),
            std::string::npos);
  EXPECT_NE(refusal(path("missing"), OutputKind::kExistingDirectory, "--nvme-path").find("does not exist"),
            std::string::npos);
}

TEST_F(OutputPathTest, RefusesAPathOfTheWrongKind) {
  fs::create_directory(path("dir"));
  touch("file");
  EXPECT_NE(refusal(path("dir"), OutputKind::kFile).find("is a directory"), std::string::npos);
  EXPECT_NE(refusal(path("new/"), OutputKind::kFile).find("ends in '/'"), std::string::npos);
  EXPECT_NE(refusal(path("file"), OutputKind::kDirectory).find("is not a directory"), std::string::npos);
  EXPECT_NE(refusal(path("file"), OutputKind::kDirectoryTree).find("is not a directory"), std::string::npos);
  // A level of the path that is a file: below it nothing can be made.
  EXPECT_NE(refusal(path("file/a/b"), OutputKind::kDirectoryTree, "--save-dir").find("--save-dir"),
            std::string::npos);
  EXPECT_NE(refusal(path("file/x.bin"), OutputKind::kFile).find("is a file, not a directory"), std::string::npos);
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_NE(refusal(path("fifo"), OutputKind::kFile).find("not a regular file"), std::string::npos);
}

TEST_F(OutputPathTest, ProbesTheDirectoryTheBytesGoTo) {
  EXPECT_NO_THROW(probe_directory(root_, "--out", root_));
  EXPECT_EQ(entries(), 0u);
  // A directory without write permission refuses a new file unless the process is root, which the
  // permission bits do not stop (tests/cli/outputs_tests.py covers a read-only mount for root).
  fs::create_directory(path("locked"));
  fs::permissions(path("locked"), fs::perms::owner_read | fs::perms::owner_exec);
  if (::geteuid() != 0) {
    const std::string e = refusal(path("locked/out.bin"), OutputKind::kFile);
    EXPECT_NE(e.find("cannot write in '" + path("locked") + "'"), std::string::npos) << e;
  } else {
    EXPECT_NO_THROW(check_output_path(path("locked/out.bin"), OutputKind::kFile, "--out"));
  }
  fs::permissions(path("locked"), fs::perms::owner_all);
}

}  // namespace
}  // namespace zerodp
