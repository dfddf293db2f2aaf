// The per-run offload directory: names that never collide, and cleaning up only what is provably
// stale (this host, a process that is gone).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/run_dir.h"

namespace zerodp::io {
namespace {

namespace fs = std::filesystem;

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("zerodp_rundir_test_" + std::to_string(::getpid()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

// The pid of a process that has exited (and been reaped).
int64_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) _exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST_F(RunDirTest, ThisProcessIsAliveAndNamedByIt) {
  const ProcessIdentity me = this_process();
  EXPECT_GT(me.start_ticks, 0u);
  EXPECT_TRUE(process_alive(me.pid, me.start_ticks));
  EXPECT_FALSE(process_alive(me.pid, me.start_ticks + 1));  // the same pid, another process
  EXPECT_FALSE(process_alive(dead_pid(), me.start_ticks));
  const std::string name = run_dir_name(me);
  EXPECT_EQ(name, "zerodp-offload." + me.host + "." + std::to_string(me.pid) + "." + std::to_string(me.start_ticks));
  EXPECT_EQ(name.find('/'), std::string::npos);
}

TEST_F(RunDirTest, RemovesOnlyWhatIsProvablyStale) {
  const ProcessIdentity me = this_process();
  ProcessIdentity gone = me, reused = me, other_host = me;
  gone.pid = dead_pid();
  reused.start_ticks = me.start_ticks + 12345;  // this pid, started at another time: not the owner
  other_host.host = me.host + "-elsewhere";
  other_host.pid = dead_pid();
  for (const ProcessIdentity& p : {me, gone, reused, other_host}) fs::create_directory(root_ / run_dir_name(p));
  std::ofstream(root_ / run_dir_name(gone) / "rank0-optim") << "left by a crash before unlink";
  fs::create_directory(root_ / "zerodp-offload.not-ours");
  fs::create_directory(root_ / "data");
  EXPECT_EQ(remove_stale_run_dirs(root_.string()), 2);
  EXPECT_TRUE(fs::exists(root_ / run_dir_name(me)));
  EXPECT_FALSE(fs::exists(root_ / run_dir_name(gone)));
  EXPECT_FALSE(fs::exists(root_ / run_dir_name(reused)));
  EXPECT_TRUE(fs::exists(root_ / run_dir_name(other_host)));
  EXPECT_TRUE(fs::exists(root_ / "zerodp-offload.not-ours"));
  EXPECT_TRUE(fs::exists(root_ / "data"));
}

TEST_F(RunDirTest, ADirectoryPerRunRemovedAtTheEnd) {
  const std::string name = run_dir_name(this_process());
  {
    RunDir a(root_.string(), name);
    RunDir b(root_.string(), name);  // a second rank of the same run joins it
    EXPECT_TRUE(fs::is_directory(a.path()));
    EXPECT_EQ(a.path(), b.path());
  }
  EXPECT_TRUE(fs::is_empty(root_));
  EXPECT_THROW(RunDir((root_ / "missing").string(), name), UsageError);
  std::ofstream(root_ / "file") << "x";
  EXPECT_THROW(RunDir((root_ / "file").string(), name), UsageError);
  EXPECT_THROW(RunDir("", name), UsageError);
}

}  // namespace
}  // namespace zerodp::io
