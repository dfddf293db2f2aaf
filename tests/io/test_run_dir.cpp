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
  const std::string name = run_dir_name(me, 7);
  EXPECT_EQ(name,
            "zerodp-offload." + me.host + "." + std::to_string(me.pid) + "." + std::to_string(me.start_ticks) + ".7");
  EXPECT_EQ(name.find('/'), std::string::npos);
  // Runs one after another in one process get directories of their own.
  const uint64_t first = next_run_number();
  EXPECT_NE(run_dir_name(me, first), run_dir_name(me, next_run_number()));
}

TEST_F(RunDirTest, RemovesOnlyWhatIsProvablyStale) {
  const ProcessIdentity me = this_process();
  ProcessIdentity gone = me, reused = me, other_host = me;
  gone.pid = dead_pid();
  reused.start_ticks = me.start_ticks + 12345;  // this pid, started at another time: not the owner
  other_host.host = me.host + "-elsewhere";
  other_host.pid = dead_pid();
  for (const ProcessIdentity& p : {me, gone, reused, other_host}) fs::create_directory(root_ / run_dir_name(p, 0));
  std::ofstream(root_ / run_dir_name(gone, 0) / "rank0-optim") << "left by a crash before unlink";
  // The name of earlier versions (no run number), left by a crash: stale too.
  const std::string old_form = "zerodp-offload." + gone.host + "." + std::to_string(gone.pid) + "." +
                               std::to_string(gone.start_ticks);
  fs::create_directory(root_ / old_form);
  fs::create_directory(root_ / "zerodp-offload.not-ours");
  fs::create_directory(root_ / ("zerodp-offload." + me.host + ".1.2.3.4"));  // five fields: not ours
  fs::create_directory(root_ / "data");
  EXPECT_EQ(remove_stale_run_dirs(root_.string()), 3);
  EXPECT_TRUE(fs::exists(root_ / run_dir_name(me, 0)));
  EXPECT_FALSE(fs::exists(root_ / run_dir_name(gone, 0)));
  EXPECT_FALSE(fs::exists(root_ / old_form));
  EXPECT_FALSE(fs::exists(root_ / run_dir_name(reused, 0)));
  EXPECT_TRUE(fs::exists(root_ / run_dir_name(other_host, 0)));
  EXPECT_TRUE(fs::exists(root_ / ("zerodp-offload." + me.host + ".1.2.3.4")));
  EXPECT_TRUE(fs::exists(root_ / "zerodp-offload.not-ours"));
  EXPECT_TRUE(fs::exists(root_ / "data"));
}

TEST_F(RunDirTest, ADirectoryPerRunRemovedAtTheEnd) {
  const std::string name = run_dir_name(this_process(), next_run_number());
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
