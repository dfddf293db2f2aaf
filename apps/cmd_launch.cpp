// `zerodp launch [--max-restarts K] [--min-ranks M] [--join-timeout S] [--launcher PROG] [launcher args] --
// train ...`:
// runs the job under a launcher (mpirun by default, or srun) and, when it fails, runs it again from
// the latest checkpoint of its --save-dir, up to K times. A failure that another attempt cannot fix is
// not retried: bad usage or input (exit 2) and a memory budget too small (exit 3) end the launch with
// their code, as does a launch interrupted by SIGINT or SIGTERM (forwarded to the job first).
//
// With --min-ranks M the job may go on with fewer ranks than it started with (elastic, downward): an
// attempt that fails without having written a new checkpoint (what a lost host does to every attempt
// at the old size) is followed by one at the next smaller world size >= M that keeps the global batch
// (--train-batch-size) a whole number of micro-batches per rank; the checkpoint reshards on resume
// and the accumulation steps grow to make up the batch. The world size is the launcher's -n/-np
// (mpirun) or -n/--ntasks (srun), rewritten for each attempt.
//
// A job whose rank failed ends promptly even when mpirun would not: every rank that ends the job
// (comm::abort_job) leaves a note in the attempt's status directory (ZERODP_LAUNCH_STATUS_DIR, made
// here). mpirun normally exits a second or two after such a failure; when a host's link is cut it
// waits instead for OpenMPI's keep-alive on the daemon it can no longer reach (minutes). So once a
// note exists and mpirun has not exited within --end-grace seconds, the attempt is ended (SIGTERM,
// then SIGKILL 5 s later) and counts as failed with the rank's exit code: a watchdog that fires
// after --comm-timeout thus restarts the job within --comm-timeout + --end-grace + a few seconds,
// without touching the keep-alive that a healthy slow link needs. Notes come from the ranks on this
// host (mpirun hands its environment to them); a launch from a host that runs no rank gets none.
//
// A try that cannot start is no failure of the job and spends no restart (apps/launch_start.h): when
// the launcher says it could not start its daemons (Open MPI's "unable to reliably start one or more
// daemons", a host that does not answer: a cut link, a host rebooting), no rank left a note and no
// checkpoint came, the launch says which host the launcher named, waits 1 s, 2 s, 4 s ... (at most
// 30 s) and tries the same attempt again, until --join-timeout seconds (default 600, as torchrun's
// rendezvous join_timeout) after the first such try; then the try counts as a failed attempt, and so
// does every one that cannot start until an attempt gets going again. Without this a two-minute cut
// used up --max-restarts 3 within a second of the first restart. With --min-ranks and a smaller size
// left, such a try is a failed attempt at once (the smaller size may not need the host).
//
// The launcher's stdout and stderr pass through the launch (as they come) to read that message.
// The launcher process itself never joins MPI: it only starts the job and waits for it.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "apps/commands.h"
#include "apps/launch_start.h"
#include "apps/train_options.h"
#include "core/error.h"

extern char** environ;

namespace zerodp::cli {

namespace {

struct LaunchOptions {
  int max_restarts = 3;
  int min_ranks = 0;  // 0: always the world size the launcher was given
  std::string launcher = "mpirun";
  double end_grace_s = 10;  // after a rank's failure note, how long mpirun may take to end
  double join_timeout_s = 600;  // how long tries that cannot start are repeated (torchrun's join_timeout)
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

// `args` without `flag` and its value (as "--flag V" or "--flag=V").
std::vector<std::string> without_flag(const std::vector<std::string>& args, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind(flag + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

// `args` with --resume set to `path` (replacing any --resume given).
std::vector<std::string> with_resume(const std::vector<std::string>& args, const std::string& path) {
  std::vector<std::string> out = without_flag(args, "--resume");
  out.push_back("--resume");
  out.push_back(path);
  return out;
}

// The launcher's options that give the number of ranks (mpirun: -n, -np, --n, --np; srun: -n, --ntasks).
const std::vector<std::string> kWorldSizeFlags = {"-n", "-np", "--n", "--np", "--ntasks"};

// Where the world size is among the launcher's arguments: {index of the value, the flag}; {-1, ""} if absent.
std::pair<int, std::string> world_size_position(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    for (const std::string& f : kWorldSizeFlags) {
      if (args[i] == f && i + 1 < args.size()) return {static_cast<int>(i + 1), f};
      if (args[i].rfind(f + "=", 0) == 0) return {static_cast<int>(i), f};
    }
  }
  return {-1, ""};
}

// `text` as a positive integer; `what` names it in the error.
int64_t positive_integer(const std::string& text, const std::string& what) {
  int64_t n = 0;
  size_t used = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ZDP_REQUIRE(used == text.size() && n > 0, "zerodp launch: {} must be a positive integer, got '{}'", what,
              text.substr(0, 32));
  return n;
}

// The world sizes an elastic launch may run at, largest first: from `ranks` down to `min_ranks`,
// those at which the global batch is a whole number of micro-batches on every rank.
std::vector<int> elastic_world_sizes(int ranks, int min_ranks, int64_t global_batch, int64_t micro_batch) {
  std::vector<int> sizes;
  for (int w = ranks; w >= min_ranks; --w)
    if (global_batch % (micro_batch * w) == 0) sizes.push_back(w);
  return sizes;
}

// The latest checkpoint's name in save_dir ("" when none): a new one means the attempt made progress.
std::string latest_checkpoint(const std::string& save_dir) {
  std::FILE* f = std::fopen((std::filesystem::path(save_dir) / "latest").c_str(), "rb");
  if (f == nullptr) return {};
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  return std::string(buf, n);
}

// The attempt's status directory, where failing ranks leave notes; removed at exit.
class StatusDir {
 public:
  StatusDir() {
    std::error_code ec;
    std::string pattern = (std::filesystem::temp_directory_path(ec) / "zerodp-launch-XXXXXX").string();
    if (ec) pattern = "/tmp/zerodp-launch-XXXXXX";
    ZDP_REQUIRE(::mkdtemp(pattern.data()) != nullptr, "zerodp launch: cannot make a status directory {}: {}", pattern,
                std::strerror(errno));
    path_ = pattern;
    ::setenv("ZERODP_LAUNCH_STATUS_DIR", path_.c_str(), 1);
  }
  ~StatusDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  StatusDir(const StatusDir&) = delete;
  StatusDir& operator=(const StatusDir&) = delete;

  // Forgets the notes of an earlier attempt.
  void clear() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path_, ec)) std::filesystem::remove(e.path(), ec);
  }
  // The first failure note: {rank, exit code}; rank empty when there is none.
  std::pair<std::string, int> first_note() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path_, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("rank-", 0) != 0 || name.find('.') != std::string::npos) continue;
      int code = 1;
      if (std::FILE* f = std::fopen(e.path().c_str(), "rb")) {
        if (std::fscanf(f, "%d", &code) != 1 || code <= 0 || code > 255) code = 1;
        std::fclose(f);
      }
      return {name.substr(5, 16), code};
    }
    return {"", 0};
  }

 private:
  std::string path_;
};

// How an attempt ended: its exit code and the end of the launcher's output.
struct AttemptEnd {
  int code = 0;
  std::string output;
};

// Runs argv to completion, its output passed on through `relay`; the code is its exit code (128 + the
// signal that ended it), or, when a rank left a failure note in `status` and the launcher outlived
// it by --end-grace, that rank's code once the launcher is ended.
AttemptEnd run_child(const std::vector<std::string>& argv, const StatusDir& status_dir) {
  using Clock = std::chrono::steady_clock;
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  OutputRelay relay;
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  relay.redirect(&actions);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  relay.spawned();
  ZDP_REQUIRE(rc == 0, "zerodp launch: cannot start '{}': {}", argv[0], std::strerror(rc));
  g_child = pid;
  if (const int sig = g_stop_signal.load(); sig != 0) ::kill(pid, sig);  // a signal that came meanwhile
  int status = 0;
  std::pair<std::string, int> note;
  Clock::time_point noted_at, ended_at;
  bool ending = false, killed = false;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    ZDP_CHECK(done == 0 || errno == EINTR, "waitpid: {}", std::strerror(errno));
    const Clock::time_point now = Clock::now();
    const auto since = [&](Clock::time_point t) { return std::chrono::duration<double>(now - t).count(); };
    if (note.first.empty()) {
      note = status_dir.first_note();
      noted_at = now;
    } else if (!ending && since(noted_at) >= g_launch.end_grace_s) {
      std::fprintf(stderr,
                   "zerodp launch: rank %s ended the job (exit %d) %.0f s ago and %s has not exited (waiting on a host "
                   "it cannot reach?): ending it\n",
                   note.first.c_str(), note.second, since(noted_at), argv[0].c_str());
      std::fflush(stderr);
      ::kill(pid, SIGTERM);
      ending = true;
      ended_at = now;
    } else if (ending && !killed && since(ended_at) >= 5) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
    relay.pump(50);
  }
  g_child = 0;
  relay.finish();
  const int code = ending ? note.second : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, relay.tail()};
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// The tries to start an attempt while its hosts do not answer.
struct Outage {
  int failed_tries = 0;                         // in a row, since the last attempt that got going
  std::chrono::steady_clock::time_point since;  // when the first of them ended
};

// After a try that could not start: says on stderr what it waits for, waits its backoff
// (start_backoff_s) and returns true: try again, no restart spent. Returns false once --join-timeout
// has passed since the first such try (the try then counts as a failed attempt), or when SIGINT or
// SIGTERM came during the wait.
bool wait_for_hosts(Outage& outage, const StartFailure& why, int attempt) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  if (outage.failed_tries++ == 0) outage.since = now;
  const double waited = std::chrono::duration<double>(now - outage.since).count();
  std::string hosts;
  for (const std::string& h : why.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
  const std::string who = why.hosts.empty()   ? "a host does not answer (the launcher did not name it)"
                          : why.hosts.size() == 1 ? "host " + hosts + " does not answer"
                                                  : "hosts " + hosts + " do not answer";
  const std::optional<double> wait = start_backoff_s(outage.failed_tries, waited, g_launch.join_timeout_s);
  if (!wait) {
    std::fprintf(stderr,
                 "zerodp launch: attempt %d could not start: %s, %.0f s after the first such try (--join-timeout "
                 "%.0f): counting it as a failed attempt\n",
                 attempt + 1, who.c_str(), waited, g_launch.join_timeout_s);
    return false;
  }
  // The deadline as a time of day too: a user reading the log later knows when the launch stops waiting.
  const std::time_t deadline = std::chrono::system_clock::to_time_t(
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(g_launch.join_timeout_s - waited)));
  char at[16] = "?";
  std::tm local{};
  if (::localtime_r(&deadline, &local) != nullptr) std::strftime(at, sizeof at, "%H:%M:%S", &local);
  std::fprintf(stderr,
               "zerodp launch: attempt %d could not start: %s (the launcher: \"%s\"); not counted as a restart. "
               "Waiting %.0f s, then trying again: %.0f s so far of --join-timeout %.0f (until %s)\n",
               attempt + 1, who.c_str(), why.said.c_str(), *wait, waited, g_launch.join_timeout_s, at);
  std::fflush(stderr);
  const Clock::time_point until = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*wait));
  while (Clock::now() < until) {
    if (g_stop_signal.load() != 0) return false;
    ::usleep(50 * 1000);
  }
  return g_stop_signal.load() == 0;
}

int launch(const std::vector<std::string>& launcher_args) {
  const std::vector<std::string>& command = launched_command().words;
  ZDP_REQUIRE(launched_command().separator && !command.empty(),
              "zerodp launch: expected '-- <command>' after the launcher's arguments, e.g. `zerodp launch "
              "--max-restarts 2 -n 4 -- train --save-dir ckpt ...`");
  ZDP_REQUIRE(command[0] == "train", "zerodp launch runs `train`, got '{}'", command[0].substr(0, 64));
  // The train command as `zerodp train` will resolve it (flags over --config's JSON over defaults).
  const train::ResolvedConfig resolved =
      resolve_train_words(std::vector<std::string>(command.begin() + 1, command.end()));
  const train::TrainConfig& job = resolved.config;
  const std::string save_dir = job.save_dir;
  ZDP_REQUIRE(!save_dir.empty(),
              "zerodp launch: the train command needs --save-dir: a restarted job continues from the latest "
              "checkpoint there");

  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  // --min-ranks: the world sizes it may go down to, and the global batch they all keep.
  std::vector<int> sizes;
  std::pair<int, std::string> size_at{-1, ""};
  int64_t global_batch = 0, micro_batch = 0;
  if (g_launch.min_ranks > 0) {
    size_at = world_size_position(launcher_args);
    ZDP_REQUIRE(size_at.first >= 0,
                "zerodp launch --min-ranks: give the number of ranks among the launcher's arguments (-n/-np for "
                "mpirun, -n/--ntasks for srun): it is what a restart lowers");
    const std::string& text = launcher_args[static_cast<size_t>(size_at.first)];
    const std::string value = text.rfind(size_at.second + "=", 0) == 0 ? text.substr(size_at.second.size() + 1) : text;
    const int64_t asked = positive_integer(value, "the launcher's " + size_at.second);
    ZDP_REQUIRE(asked <= (1 << 20), "zerodp launch: the launcher's {} {} is over the 2^20 ranks zerodp runs",
                size_at.second, asked);
    const int ranks = static_cast<int>(asked);
    ZDP_REQUIRE(g_launch.min_ranks <= ranks, "zerodp launch: --min-ranks {} is more than the {} ranks asked for ({})",
                g_launch.min_ranks, ranks, size_at.second);
    ZDP_REQUIRE(job.train_batch_size.has_value() && job.micro_batch_set,
                "zerodp launch --min-ranks: the train command needs --train-batch-size and --micro-batch (or "
                "train_batch_size and train_micro_batch_size_per_gpu in --config): the global batch, kept at every "
                "world size, is ranks x micro-batch x accumulation steps");
    global_batch = *job.train_batch_size;
    micro_batch = job.micro_batch;
    ZDP_REQUIRE(global_batch > 0 && micro_batch > 0 && micro_batch < (int64_t{1} << 40),
                "zerodp launch: --train-batch-size {} and --micro-batch {} must be positive, the micro-batch under 2^40",
                global_batch, micro_batch);
    ZDP_REQUIRE(global_batch % (micro_batch * ranks) == 0,
                "zerodp launch: --train-batch-size {} is not a multiple of --micro-batch {} x {} ranks", global_batch,
                micro_batch, ranks);
    sizes = elastic_world_sizes(ranks, g_launch.min_ranks, global_batch, micro_batch);
    std::string listed;
    for (int w : sizes) listed += (listed.empty() ? "" : ", ") + std::to_string(w);
    std::fprintf(stderr, "zerodp launch: world sizes it may run at: %s (--min-ranks %d, global batch %lld sequences)\n",
                 listed.c_str(), g_launch.min_ranks, static_cast<long long>(global_batch));
  }
  size_t size_index = 0;  // into sizes

  const std::string self = self_executable();
  const StatusDir status_dir;
  Outage outage;
  int start_try = 1;  // of this attempt
  for (int attempt = 0;;) {
    status_dir.clear();
    std::vector<std::string> args = command;
    const std::string checkpoint_before = latest_checkpoint(save_dir);
    if (attempt > 0 && !checkpoint_before.empty()) args = with_resume(args, save_dir);
    std::vector<std::string> launch_args = launcher_args;
    if (!sizes.empty() && size_index > 0) {
      // A smaller world: the accumulation steps that keep the global batch, as a flag (which wins over
      // a gradient_accumulation_steps in --config).
      const int w = sizes[size_index];
      std::string& slot = launch_args[static_cast<size_t>(size_at.first)];
      slot = slot.rfind(size_at.second + "=", 0) == 0 ? size_at.second + "=" + std::to_string(w) : std::to_string(w);
      args = without_flag(args, "--accum");
      args.push_back("--accum");
      args.push_back(std::to_string(global_batch / (micro_batch * w)));
    }
    std::vector<std::string> argv{g_launch.launcher};
    argv.insert(argv.end(), launch_args.begin(), launch_args.end());
    argv.push_back(self);
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string tries = start_try > 1 ? fmt::format(" (try {} to start)", start_try) : "";
    std::fprintf(stderr, "zerodp launch: attempt %d of %d%s: %s\n", attempt + 1, g_launch.max_restarts + 1,
                 tries.c_str(), joined(argv).c_str());
    std::fflush(stderr);
    const AttemptEnd end = run_child(argv, status_dir);
    const int rc = end.code;
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
    // A try that could not start (no rank ran: the launcher says so, no rank left a note, no checkpoint
    // came) is tried again after a wait, without spending a restart, unless --min-ranks may go on
    // without the host that does not answer.
    const StartFailure start = read_start_failure(end.output);
    const bool no_rank_ran = status_dir.first_note().first.empty() && latest_checkpoint(save_dir) == checkpoint_before;
    const bool may_shrink = !sizes.empty() && size_index + 1 < sizes.size();
    if (start.launcher_refused_arguments && no_rank_ran) {
      std::fprintf(stderr, "zerodp launch: %s refused its arguments (%s): another attempt would fail alike; not "
                   "restarting\n", g_launch.launcher.c_str(), start.said.c_str());
      return static_cast<int>(ExitCode::kUsage);
    }
    if (start.could_not_start && no_rank_ran && !may_shrink) {
      if (wait_for_hosts(outage, start, attempt)) {
        ++start_try;
        continue;
      }
      if (const int sig = g_stop_signal.load(); sig != 0) {
        std::fprintf(stderr, "zerodp launch: stopped by signal %d while waiting for the hosts; not restarting\n", sig);
        return 128 + sig;
      }
    } else {
      outage = {};  // the attempt got going (or another rule applies): a later outage gets its own wait
    }
    if (attempt == g_launch.max_restarts) {
      std::fprintf(stderr, "zerodp launch: the job failed (exit %d) and %d restart%s were used up; giving up\n", rc,
                   g_launch.max_restarts, g_launch.max_restarts == 1 ? "" : "s");
      return rc;
    }
    const std::string checkpoint_after = latest_checkpoint(save_dir);
    std::string where;
    if (!sizes.empty() && checkpoint_after == checkpoint_before && size_index + 1 < sizes.size()) {
      // No new checkpoint: the same size would likely fail alike (a host gone); go on with fewer ranks.
      ++size_index;
      const int w = sizes[size_index];
      where = fmt::format(" at {} rank{} (no new checkpoint at {}: global batch {} = {} x micro-batch {} x {} "
                          "accumulation steps)",
                          w, w == 1 ? "" : "s", sizes[size_index - 1], global_batch, w, micro_batch,
                          global_batch / (micro_batch * w));
    }
    std::fprintf(stderr, "zerodp launch: the job failed (exit %d); restarting%s %s\n", rc, where.c_str(),
                 !checkpoint_after.empty() ? fmt::format("from the latest checkpoint in {}", save_dir).c_str()
                                           : "from the start (no checkpoint yet)");
    ++attempt;  // not after a try that could not start: it spent no restart
    start_try = 1;
  }
}

void register_launch(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "launch",
      "Run a training job under mpirun (or srun) and restart it from its latest checkpoint when it fails: "
      "zerodp launch [--max-restarts K] [--min-ranks M] [--join-timeout S] [launcher args] -- train --save-dir DIR "
      "...");
  cmd->add_option("--max-restarts", g_launch.max_restarts, "Attempts after the first, at most")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--min-ranks", g_launch.min_ranks,
                  "After a failed attempt that wrote no new checkpoint, go on with fewer ranks, down to M, keeping "
                  "--train-batch-size (the checkpoint reshards; accumulation steps grow). 0: never")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--launcher", g_launch.launcher, "The program that starts the ranks (mpirun, srun, ...)")
      ->capture_default_str();
  cmd->add_option("--join-timeout", g_launch.join_timeout_s,
                  "Seconds to keep trying to start an attempt that cannot start because a host does not answer (the "
                  "launcher could not start its daemon there; no rank ran): such tries spend no restart and are "
                  "repeated after 1 s, 2 s, 4 s ... up to 30 s apart, until this long after the first "
                  "(torchrun's rendezvous join_timeout). 0: count them as failed attempts at once")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 7.0 * 24 * 3600));
  cmd->add_option("--end-grace", g_launch.end_grace_s,
                  "Seconds the launcher may take to exit after a rank ended the job (--comm-timeout, an error) before "
                  "the attempt is ended: a cut link otherwise keeps mpirun waiting for its keep-alive")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  // The arguments it does not know are the launcher's (the command after "--" was set aside before).
  cmd->prefix_command();
  cmd->callback([cmd, &action] {
    const std::vector<std::string> rest = cmd->remaining();
    action = [rest] { return launch(rest); };
  });
}
const CommandRegistration launch_registration(45, register_launch);

}  // namespace

}  // namespace zerodp::cli
