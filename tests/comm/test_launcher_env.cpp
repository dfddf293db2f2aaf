// The rank and world size a process reads from its launcher's environment before MPI is up
// (comm::launcher_rank, launcher_size): what `srun` alone announces (SLURM_PROCID, SLURM_NTASKS), what
// OpenMPI and PMI announce over it, and values that are not a rank. tests/cli/slurm_test.sh runs the
// same under a real Slurm; this is the part of it a sanitized build runs (scripts/test_sanitized.sh).
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/runtime.h"

namespace zerodp::comm {
namespace launcher_env_test {

// Every variable the readers consult, cleared for the test and put back after it.
class LauncherEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* var : kVars) {
      const char* v = std::getenv(var);
      saved_.push_back(v ? std::string(v) : std::string("\x01"));
      unsetenv(var);
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < saved_.size(); ++i) {
      if (saved_[i] == "\x01") {
        unsetenv(kVars[i]);
      } else {
        setenv(kVars[i], saved_[i].c_str(), 1);
      }
    }
  }
  static constexpr const char* kVars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                                          "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
  std::vector<std::string> saved_;
};

TEST_F(LauncherEnv, NoLauncherIsRankZeroOfOne) {
  EXPECT_EQ(launcher_rank(), 0);
  EXPECT_EQ(launcher_size(), 1);
}

TEST_F(LauncherEnv, SrunAloneGivesSlurmsRankAndTasks) {
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "4", 1);
  EXPECT_EQ(launcher_rank(), 3);
  EXPECT_EQ(launcher_size(), 4);
}

TEST_F(LauncherEnv, MpirunInsideAnAllocationWinsOverSlurm) {
  // sbatch sets SLURM_NTASKS for the whole allocation; the ranks mpirun starts are what count.
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
  EXPECT_EQ(launcher_rank(), 5);
  EXPECT_EQ(launcher_size(), 6);
}

TEST_F(LauncherEnv, ValuesThatAreNotARankFallThrough) {
  setenv("OMPI_COMM_WORLD_RANK", "", 1);
  setenv("PMI_RANK", "2x", 1);
  setenv("PMIX_RANK", "-1", 1);
  setenv("SLURM_PROCID", "7", 1);
  setenv("PMI_SIZE", "99999999999999999999", 1);
  EXPECT_EQ(launcher_rank(), 7);
  EXPECT_EQ(launcher_size(), 1);
}

}  // namespace launcher_env_test
}  // namespace zerodp::comm
