#include "comm/watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "comm/mpi_c.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_leak_scope.h"

namespace zerodp::comm {

namespace {

constexpr int kAskTag = 0x5a57;
constexpr int kReplyTag = 0x5a58;
constexpr double kAnswerSeconds = 3.0;  // how long a member has to answer
constexpr size_t kListed = 8;           // ranks named in each list of the message

// The answer to "where are you on communicator C?": 256 bytes.
struct Reply {
  uint64_t issued = 0;        // collectives this process issued on C
  uint64_t waiting_seq = 0;   // the number on C of the collective it is blocked on, when waiting_on_c
  uint8_t knows = 0;          // whether it has C at all
  uint8_t waiting_on_c = 0;   // whether it is blocked on a collective of C
  char doing[238] = {};
};
static_assert(sizeof(Reply) == 256);

std::mutex g_text_mu;
std::string g_context = "starting";
std::string g_waiting;
uint64_t g_waiting_comm = 0, g_waiting_seq = 0;  // meaningful while g_waiting is not empty

struct Service {
  MPI_Comm comm = MPI_COMM_NULL;
  std::thread thread;
  std::atomic<bool> stop{false};
};
std::mutex g_service_mu;
Service* g_service = nullptr;

std::string doing_now() {
  std::lock_guard<std::mutex> lock(g_text_mu);
  return g_context + ": " + (g_waiting.empty() ? std::string("running, not waiting on a collective")
                                              : "waiting on " + g_waiting);
}

Reply status_on(uint64_t comm_id) {
  Reply r;
  const std::optional<uint64_t> issued = collectives_issued_on(comm_id);
  r.knows = issued.has_value() ? 1 : 0;
  r.issued = issued.value_or(0);
  {
    std::lock_guard<std::mutex> lock(g_text_mu);
    if (!g_waiting.empty() && g_waiting_comm == comm_id) {
      r.waiting_on_c = 1;
      r.waiting_seq = g_waiting_seq;
    }
  }
  const std::string text = doing_now();
  std::memcpy(r.doing, text.data(), std::min(text.size(), sizeof r.doing - 1));
  return r;
}

// The service thread: answers one question at a time until stopped.
void serve(Service* s) {
  const MpiLeakScope openmpi_keeps_this;  // this thread runs OpenMPI's code only
  while (!s->stop.load()) {
    uint64_t asked = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Irecv(&asked, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kAskTag, s->comm, &req) != MPI_SUCCESS) return;
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Test(&req, &flag, &st) != MPI_SUCCESS) return;
      if (flag) {
        const Reply r = status_on(asked);
        MPI_Send(&r, sizeof r, MPI_BYTE, st.MPI_SOURCE, kReplyTag, s->comm);
        break;
      }
      if (s->stop.load()) {
        MPI_Cancel(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

// "0-3, 5, 9" for an ascending list, at most kListed items.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  size_t items = 0;
  for (size_t i = 0; i < ranks.size(); ++items) {
    if (items == kListed) return out + ", ...";
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : fmt::format("{}", ranks[i]));
    i = j + 1;
  }
  return out;
}

}  // namespace

void set_activity_context(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_text_mu);
  g_context = what;
}

std::string activity_context() {
  std::lock_guard<std::mutex> lock(g_text_mu);
  return g_context;
}

void set_waiting_on(const std::string& what, uint64_t comm_id, uint64_t seq) {
  std::lock_guard<std::mutex> lock(g_text_mu);
  g_waiting = what;
  g_waiting_comm = comm_id;
  g_waiting_seq = seq;
}

void clear_waiting() {
  std::lock_guard<std::mutex> lock(g_text_mu);
  g_waiting.clear();
}

void start_status_service() {
  std::lock_guard<std::mutex> lock(g_service_mu);
  if (g_service != nullptr) return;
  auto* s = new Service;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &s->comm), "MPI_Comm_dup (the watchdog's status channel)");
  check_mpi(MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler (status channel)");
  s->thread = std::thread(serve, s);
  g_service = s;
}

void stop_status_service() {
  std::lock_guard<std::mutex> lock(g_service_mu);
  if (g_service == nullptr) return;
  g_service->stop = true;
  if (g_service->thread.joinable()) g_service->thread.join();
  MPI_Comm_free(&g_service->comm);
  delete g_service;
  g_service = nullptr;
}

std::string diagnose_stuck_collective(const StuckCollective& c) {
  const size_t n = c.world_ranks.size();
  std::vector<Reply> replies(n);
  std::vector<MPI_Request> recv(n, MPI_REQUEST_NULL), send(n, MPI_REQUEST_NULL);
  std::vector<bool> answered(n, false);
  MPI_Comm comm = MPI_COMM_NULL;
  {
    std::lock_guard<std::mutex> lock(g_service_mu);
    if (g_service != nullptr) comm = g_service->comm;
  }
  uint64_t id = c.comm_id;
  for (size_t i = 0; i < n; ++i) {
    const int m = c.world_ranks[i];
    if (m == c.my_world_rank) {
      replies[i] = status_on(c.comm_id);
      answered[i] = true;
      continue;
    }
    if (comm == MPI_COMM_NULL) continue;
    if (MPI_Irecv(&replies[i], sizeof(Reply), MPI_BYTE, m, kReplyTag, comm, &recv[i]) != MPI_SUCCESS ||
        MPI_Isend(&id, 1, MPI_UINT64_T, m, kAskTag, comm, &send[i]) != MPI_SUCCESS)
      recv[i] = MPI_REQUEST_NULL;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kAnswerSeconds);
  for (;;) {
    bool pending = false;
    for (size_t i = 0; i < n; ++i) {
      if (answered[i] || recv[i] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      if (MPI_Test(&recv[i], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) {
        answered[i] = true;
      } else {
        pending = true;
      }
    }
    if (!pending || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The requests still open are left to the job's end, which is near.

  std::vector<int> arrived, silent;
  std::vector<std::string> behind, ahead;
  for (size_t i = 0; i < n; ++i) {
    const int m = c.world_ranks[i];
    if (!answered[i]) {
      silent.push_back(m);
      continue;
    }
    const Reply& r = replies[i];
    const std::string doing(r.doing, strnlen(r.doing, sizeof r.doing));
    if (r.knows && r.issued > c.seq) {
      arrived.push_back(m);
      // Blocked on a later collective of C: it went past this one, so the members disagree on their
      // collectives. (Having issued later ones proves nothing: collectives are issued ahead, as prefetches.)
      if (r.waiting_on_c && r.waiting_seq > c.seq && m != c.my_world_rank && ahead.size() <= kListed)
        ahead.push_back(ahead.size() < kListed ? fmt::format("rank {} (issued {} there; {})", m, r.issued, doing) : "...");
    } else if (behind.size() < kListed) {
      behind.push_back(r.knows ? fmt::format("rank {} (issued {} collective{} there; {})", m, r.issued,
                                             r.issued == 1 ? "" : "s", doing)
                               : fmt::format("rank {} (does not have this communicator; {})", m, doing));
    } else {
      behind.push_back("...");
    }
  }
  std::string msg = fmt::format(
      "collective {} (#{} on a communicator of {} rank{}: world ranks {}) did not complete within {:.0f} s "
      "(--comm-timeout) on rank {} ({})",
      c.what, c.seq + 1, n, n == 1 ? "" : "s", rank_list(c.world_ranks), c.waited_s, c.my_world_rank,
      activity_context());
  std::string missing;
  if (!silent.empty())
    missing += fmt::format("rank{} {} did not answer within {:.0f} s (stopped, hung outside MPI, or cut off)",
                           silent.size() == 1 ? "" : "s", rank_list(silent), kAnswerSeconds);
  behind.erase(std::unique(behind.begin(), behind.end()), behind.end());
  for (const std::string& b : behind) missing += (missing.empty() ? "" : "; ") + b;
  msg += missing.empty() ? ". Every member had issued it (they may disagree on what it is: a collective skipped or "
                           "issued in another order)"
                         : ". Not arrived: " + missing;
  if (!arrived.empty()) msg += fmt::format(". Arrived: rank{} {}", arrived.size() == 1 ? "" : "s", rank_list(arrived));
  if (!ahead.empty() && silent.empty()) {
    msg += ". Went past it, so the ranks disagree on their collectives (one skipped or added one): ";
    for (size_t i = 0; i < ahead.size(); ++i) msg += (i ? "; " : "") + ahead[i];
  } else if (!ahead.empty()) {
    // With members silent, one past it proves no disagreement: a ring may have brought it every piece
    // it needed before the others stopped (cut off downstream of it, say).
    msg += ". Already past it (its part done before the others went silent): ";
    for (size_t i = 0; i < ahead.size(); ++i) msg += (i ? "; " : "") + ahead[i];
  }
  return msg;
}

}  // namespace zerodp::comm
