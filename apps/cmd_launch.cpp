// `zerodp launch [--max-restarts K] [--launcher PROG] [launcher args] -- train ...`: runs the job
// under a launcher (mpirun by default, or srun) and, when it fails, runs it again from the latest
// checkpoint of its --save-dir, up to K times. A failure that another attempt cannot fix is not
// retried: bad usage or input (exit 2) and a memory budget too small (exit 3) end the launch with
// their code, as does a launch interrupted by SIGINT or SIGTERM (forwarded to the job first).
//
// The launcher process itself never joins MPI: it only starts the job and waits for it.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/commands.h"
#include "core/error.h"

extern char** environ;

namespace zerodp::cli {

namespace {

struct LaunchOptions {
  int max_restarts = 3;
  std::string launcher = "mpirun";
};
LaunchOptions g_launch;

std::atomic<pid_t> g_child{0};
std::atomic<int> g_stop_signal{0};

// SIGINT/SIGTERM: passed on to the job, and no further attempt is made.
void forward_signal(int sig) {
  g_stop_signal = sig;
  const pid_t child = g_child.load();
  if (child > 0) ::kill(child, sig);
}

std::string self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  ZDP_REQUIRE(!ec, "zerodp launch: cannot find its own executable (/proc/self/exe): {}", ec.message());
  return p.string();
}

// The value of `flag` among `args` (as "--flag V" or "--flag=V"); empty when absent.
std::string flag_value(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  }
  return {};
}

// `args` with --resume set to `path` (replacing any --resume given).
std::vector<std::string> with_resume(const std::vector<std::string>& args, const std::string& path) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--resume") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--resume=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  out.push_back("--resume");
  out.push_back(path);
  return out;
}

// Runs argv to completion; returns its exit code (128 + the signal that ended it).
int run_child(const std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, cargv[0], nullptr, nullptr, cargv.data(), environ);
  ZDP_REQUIRE(rc == 0, "zerodp launch: cannot start '{}': {}", argv[0], std::strerror(rc));
  g_child = pid;
  if (const int sig = g_stop_signal.load(); sig != 0) ::kill(pid, sig);  // a signal that came meanwhile
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    ZDP_CHECK(errno == EINTR, "waitpid: {}", std::strerror(errno));
  }
  g_child = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

int launch(const std::vector<std::string>& rest) {
  // rest: [launcher args...] -- <zerodp command...>
  std::vector<std::string> launcher_args, command;
  bool after = false;
  for (const std::string& a : rest) {
    if (!after && a == "--") {
      after = true;
      continue;
    }
    (after ? command : launcher_args).push_back(a);
  }
  ZDP_REQUIRE(after && !command.empty(),
              "zerodp launch: expected '-- <command>' after the launcher's arguments, e.g. `zerodp launch "
              "--max-restarts 2 -n 4 -- train --save-dir ckpt ...`");
  ZDP_REQUIRE(command[0] == "train", "zerodp launch runs `train`, got '{}'", command[0].substr(0, 64));
  const std::string save_dir = flag_value(command, "--save-dir");
  ZDP_REQUIRE(!save_dir.empty(),
              "zerodp launch: the train command needs --save-dir: a restarted job continues from the latest "
              "checkpoint there");

  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  const std::string self = self_executable();
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> args = command;
    const bool have_checkpoint = std::filesystem::exists(std::filesystem::path(save_dir) / "latest");
    if (attempt > 0 && have_checkpoint) args = with_resume(args, save_dir);
    std::vector<std::string> argv{g_launch.launcher};
    argv.insert(argv.end(), launcher_args.begin(), launcher_args.end());
    argv.push_back(self);
    argv.insert(argv.end(), args.begin(), args.end());
    std::fprintf(stderr, "zerodp launch: attempt %d of %d: %s\n", attempt + 1, g_launch.max_restarts + 1,
                 joined(argv).c_str());
    std::fflush(stderr);
    const int rc = run_child(argv);
    if (rc == 0) {
      if (attempt > 0)
        std::fprintf(stderr, "zerodp launch: the job finished after %d restart%s\n", attempt, attempt == 1 ? "" : "s");
      return 0;
    }
    if (const int sig = g_stop_signal.load(); sig != 0) {
      std::fprintf(stderr, "zerodp launch: stopped by signal %d (exit %d); not restarting\n", sig, rc);
      return rc;
    }
    if (rc == static_cast<int>(ExitCode::kUsage) || rc == static_cast<int>(ExitCode::kBudget)) {
      std::fprintf(stderr, "zerodp launch: the job exited %d (%s): another attempt would fail alike; not restarting\n",
                   rc, rc == static_cast<int>(ExitCode::kUsage) ? "bad usage or input" : "over the memory budget");
      return rc;
    }
    if (attempt == g_launch.max_restarts) {
      std::fprintf(stderr, "zerodp launch: the job failed (exit %d) and %d restart%s were used up; giving up\n", rc,
                   g_launch.max_restarts, g_launch.max_restarts == 1 ? "" : "s");
      return rc;
    }
    const bool next_has_checkpoint = std::filesystem::exists(std::filesystem::path(save_dir) / "latest");
    std::fprintf(stderr, "zerodp launch: the job failed (exit %d); restarting %s\n", rc,
                 next_has_checkpoint ? fmt::format("from the latest checkpoint in {}", save_dir).c_str()
                                     : "from the start (no checkpoint yet)");
  }
}

void register_launch(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "launch",
      "Run a training job under mpirun (or srun) and restart it from its latest checkpoint when it fails: "
      "zerodp launch [--max-restarts K] [launcher args] -- train --save-dir DIR ...");
  cmd->add_option("--max-restarts", g_launch.max_restarts, "Attempts after the first, at most")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--launcher", g_launch.launcher, "The program that starts the ranks (mpirun, srun, ...)")
      ->capture_default_str();
  cmd->prefix_command();  // the first argument it does not know, and all after it, are the launcher's
  cmd->callback([cmd, &action] {
    const std::vector<std::string> rest = cmd->remaining();
    action = [rest] { return launch(rest); };
  });
}
const CommandRegistration registration(45, register_launch);

}  // namespace

}  // namespace zerodp::cli
