// See launch_start.h.
#include "apps/launch_start.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::cli {

namespace {

// What launchers print when they cannot start the job on a host, before any rank runs; each as one
// line (see read_start_failure). Open MPI 4's from its help files (help-plm-base.txt,
// help-errmgr-base.txt); Slurm's from its error table (ESLURM_NODE_NOT_AVAIL).
const char* const kStartFailureMarkers[] = {
    "ORTE was unable to reliably start one or more daemons",
    "An ORTE daemon has unexpectedly failed after launch and before communicating back to mpirun",
    "Required node not available (down, drained or reserved)",
};

// What a launcher prints when it refuses its own command line (the option follows each).
const char* const kLauncherUsageMarkers[] = {
    "mpirun: Error: unknown option",
    "srun: unrecognized option",
    "srun: invalid option",
};

// `text` with every run of whitespace (line breaks included) turned into one space.
std::string one_line(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// The word after each `before` in `text` (up to a space, ':' or ','), into `hosts` once each.
void words_after(const std::string& text, const std::string& before, std::vector<std::string>& hosts) {
  for (size_t at = text.find(before); at != std::string::npos; at = text.find(before, at + 1)) {
    const size_t start = at + before.size();
    size_t end = start;
    while (end < text.size() && text[end] != ' ' && text[end] != ':' && text[end] != ',') ++end;
    const std::string host = text.substr(start, std::min<size_t>(end - start, 255));
    if (!host.empty() && std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
}

void keep_tail(std::string& tail, const char* data, size_t n) {
  tail.append(data, n);
  // Trimmed once it is twice the size kept, not on every read.
  if (tail.size() > 2 * OutputRelay::kTailBytes) tail.erase(0, tail.size() - OutputRelay::kTailBytes);
}

// Writes all of data to fd; a closed or failing terminal loses the rest (the job runs on).
void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

StartFailure read_start_failure(const std::string& output) {
  StartFailure failure;
  const std::string text = one_line(output);
  for (const char* marker : kStartFailureMarkers) {
    if (text.find(marker) != std::string::npos) {
      failure.could_not_start = true;
      failure.said = marker;
      break;
    }
  }
  for (const char* marker : kLauncherUsageMarkers) {
    if (const size_t at = text.find(marker); at != std::string::npos && !failure.could_not_start) {
      failure.launcher_refused_arguments = true;
      failure.said = text.substr(at, std::min<size_t>(text.find(' ', at + std::strlen(marker) + 1) - at, 120));
      break;
    }
  }
  // Open MPI: "A process or daemon was unable to complete a TCP connection to another process: Local
  // host: h1 Remote host: h0": h1's daemon could not reach mpirun's host.
  const std::string tcp = "unable to complete a TCP connection to another process: Local host: ";
  words_after(text, tcp, failure.hosts);
  words_after(text, "ssh: connect to host ", failure.hosts);
  words_after(text, "ssh: Could not resolve hostname ", failure.hosts);
  return failure;
}

std::optional<double> start_backoff_s(int failed_tries, double waited_s, double join_timeout_s) {
  constexpr double kFirst = 1, kLongest = 30;
  const double left = join_timeout_s - waited_s;
  if (failed_tries < 1 || !(left > 0)) return std::nullopt;
  // 2^(tries-1), with the exponent bounded so that it cannot overflow however long the outage.
  const double doubling = kFirst * std::ldexp(1.0, std::min(failed_tries - 1, 16));
  return std::min({doubling, kLongest, left});
}

OutputRelay::OutputRelay(int out_fd, int err_fd) : pass_to_{out_fd, err_fd} {
  for (int stream = 0; stream < 2; ++stream) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      const int err = errno;
      close_all();
      throw RuntimeFailure(fmt::format("zerodp launch: cannot make a pipe for the launcher's {}: {}",
                                       stream == 0 ? "stdout" : "stderr", std::strerror(err)));
    }
    read_end_[stream] = fds[0];
    write_end_[stream] = fds[1];
    // Read without blocking: pump() reads what poll() reported, finish() what is there.
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  }
}

OutputRelay::~OutputRelay() { close_all(); }

void OutputRelay::close_all() {
  for (int stream = 0; stream < 2; ++stream) {
    if (read_end_[stream] >= 0) ::close(read_end_[stream]);
    if (write_end_[stream] >= 0) ::close(write_end_[stream]);
    read_end_[stream] = write_end_[stream] = -1;
  }
}

void OutputRelay::redirect(posix_spawn_file_actions_t* actions) const {
  // dup2 clears close-on-exec on the copies, so the launcher keeps them as its fd 1 and 2.
  ::posix_spawn_file_actions_adddup2(actions, write_end_[0], STDOUT_FILENO);
  ::posix_spawn_file_actions_adddup2(actions, write_end_[1], STDERR_FILENO);
}

void OutputRelay::spawned() {
  for (int& fd : write_end_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void OutputRelay::pump(int timeout_ms) {
  pollfd fds[2];
  nfds_t n = 0;
  for (int stream = 0; stream < 2; ++stream)
    if (read_end_[stream] >= 0) fds[n++] = {read_end_[stream], POLLIN, 0};
  if (n == 0 || ::poll(fds, n, timeout_ms) <= 0) {
    if (n == 0) ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
    return;
  }
  for (int stream = 0; stream < 2; ++stream) {
    if (read_end_[stream] < 0) continue;
    char buf[16384];
    // A bounded number of reads, so a flood on one stream cannot hold up the caller's other duties.
    for (int reads = 0; reads < 16; ++reads) {
      const ssize_t got = ::read(read_end_[stream], buf, sizeof buf);
      if (got > 0) {
        write_all(pass_to_[stream], buf, static_cast<size_t>(got));
        keep_tail(tail_[stream], buf, static_cast<size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got == 0) {  // every writer gone
        ::close(read_end_[stream]);
        read_end_[stream] = -1;
      }
      break;  // EAGAIN: nothing more for now
    }
  }
}

void OutputRelay::finish() {
  // Whatever the launcher wrote before it ended is in the pipes now; read until they are empty.
  for (int rounds = 0; rounds < 4096 && (read_end_[0] >= 0 || read_end_[1] >= 0); ++rounds) {
    bool any = false;
    for (int stream = 0; stream < 2; ++stream) {
      if (read_end_[stream] < 0) continue;
      char buf[16384];
      const ssize_t got = ::read(read_end_[stream], buf, sizeof buf);
      if (got > 0) {
        write_all(pass_to_[stream], buf, static_cast<size_t>(got));
        keep_tail(tail_[stream], buf, static_cast<size_t>(got));
        any = true;
      } else if (got < 0 && errno == EINTR) {
        any = true;
      } else {
        ::close(read_end_[stream]);
        read_end_[stream] = -1;
      }
    }
    if (!any) break;
  }
  for (int& fd : read_end_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

std::string OutputRelay::tail() const {
  const auto last = [](const std::string& s) {
    return s.size() > kTailBytes ? s.substr(s.size() - kTailBytes) : s;
  };
  return last(tail_[0]) + "\n" + last(tail_[1]);
}

}  // namespace zerodp::cli
