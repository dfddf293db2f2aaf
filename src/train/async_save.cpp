#include "train/async_save.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "core/log.h"

namespace zerodp::train {

struct CheckpointSaver::InFlight {
  SaveInProgress save;
  std::thread writer;
  // Set by the writer when it has returned; `file` and `error` are the main thread's to read after it.
  std::atomic<bool> done{false};
  ckpt::RankFile file;
  std::string error;
  // Read in place (Engine::owned_in_place; empty: the state was copied at the step boundary): the
  // writer reads each chunk of piece `next` under `mu`, from the engine's memory until freeze() has
  // copied that piece and the ones after it into the copy, from the copy after.
  std::vector<zero::Engine::OwnedRange> live;
  std::mutex mu;
  size_t next = 0;
  bool frozen = false;

  // Where the writer reads the n floats piece `next` gives at p (live[next]'s memory): there, or
  // the same place in the copy once frozen. Called with `mu` held.
  const float* source(const zero::StateCopy& copy, const float* p, size_t n) const {
    if (!frozen) return p;
    const zero::Engine::OwnedRange &from = live[next], &to = copy.ranges()[next];
    const size_t len = from.end - from.begin;
    auto within = [&](const float* a) { return p >= a && p + n <= a + len; };
    if (within(from.weights)) return to.weights + (p - from.weights);
    for (size_t k = 0; k < from.states.size(); ++k)
      if (within(from.states[k])) return to.states[k] + (p - from.states[k]);
    ZDP_CHECK(false, "a chunk of {} floats outside piece {} of the checkpoint of step {}", n, next, save.step);
    return nullptr;
  }
};

CheckpointSaver::CheckpointSaver(zero::Engine& engine, SaveContext ctx, bool async)
    : engine_(engine), ctx_(std::move(ctx)), async_(async) {
  if (async_ && writes_checkpoint_file(engine_)) {
    copy_ = zero::StateCopy::allocate(engine_);  // only writers hold one
    engine_.set_before_state_change([this] { freeze(); });
  }
}

CheckpointSaver::~CheckpointSaver() {
  freeze();  // a writer reading in place (or waiting for the update, a testing aid) goes on from the copy
  if (in_flight_ && in_flight_->writer.joinable()) in_flight_->writer.join();
  join_removal();
  if (!copy_.empty()) engine_.set_before_state_change({});
}

void CheckpointSaver::freeze() {
  if (!in_flight_ || in_flight_->live.empty()) return;
  InFlight& f = *in_flight_;
  const std::lock_guard<std::mutex> lock(f.mu);
  if (f.frozen) return;
  if (f.next < f.live.size()) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = f.next; i < f.live.size(); ++i) copy_.fill(i, f.live[i]);
    log::debug("checkpoint of step {}: {} of {} pieces not yet written, copied to host memory in {:.0f} ms",
               f.save.step, f.live.size() - f.next, f.live.size(),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  f.frozen = true;
}

void CheckpointSaver::poll() {
  if (!in_flight_) return;
  comm::Communicator& comm = engine_.comm();
  const comm::UntrackedTraffic untracked(comm);
  float writing = in_flight_->done.load(std::memory_order_acquire) ? 0.0f : 1.0f;
  comm.all_reduce(&writing, 1, DType::kF32, comm::ReduceOp::kMax);
  if (writing == 0.0f) commit();
}

void CheckpointSaver::save(int64_t step) {
  finish();  // also the removal: none of its directories is touched while this save runs
  if (!async_) {
    std::vector<std::string> retired;
    save_checkpoint(engine_, step, ctx_, &retired);
    start_removal(std::move(retired));
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto f = std::make_unique<InFlight>();
  f->save = begin_save(engine_, step, ctx_);
  if (!f->save.writes) {
    f->done = true;  // hybrid sharding: another shard group's rank writes this shard
    in_flight_ = std::move(f);
    return;
  }
  const int rank = engine_.comm().rank(), N = engine_.shard_group_size();
  // The copy is laid out as the file's data, so that the writer sends it to the disk without a staging
  // copy. Where the state is in host memory as the file holds it, the writer reads it in place while
  // the next step's forward and backward leave it alone, and the copy is filled only with what it has
  // not read when the update comes (freeze()); elsewhere it is copied now.
  const uint64_t data_offset = ckpt::rank_file_header(rank, N, step, f->save.states, f->save.ranges).size();
  f->live = engine_.owned_in_place();
  if (f->live.empty()) {
    copy_.refresh(engine_, data_offset);
  } else {
    copy_.lay_out(engine_, data_offset);
    ZDP_CHECK(copy_.ranges().size() == f->live.size(), "{} pieces in place, {} in the copy", f->live.size(),
              copy_.ranges().size());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  log::info("checkpoint of step {}: {} in {:.0f} ms, writing it while training goes on", step,
            f->live.empty() ? "state copied to host memory" : "started", ms);
  // The writer reads the copy (or the engine's memory under the lock) and the context only, and calls
  // no collective (the communicator is the main thread's); a failure is kept for the commit, which
  // every rank reaches.
  // Testing aid: ZERODP_TEST_WRITER_WAITS_FOR_UPDATE=1 holds a writer reading in place after its first
  // piece until the update has frozen the state, so that the rest comes from the copy freeze() fills.
  const char* wait_env = std::getenv("ZERODP_TEST_WRITER_WAITS_FOR_UPDATE");
  const bool wait_for_update = wait_env != nullptr && std::string(wait_env) == "1";
  f->writer = std::thread([f = f.get(), &copy = copy_, &ctx = ctx_, rank, N, wait_for_update] {
    try {
      const auto visit = [f, &copy, wait_for_update](const auto& each) {
        for (size_t i = 0; i < copy.ranges().size(); ++i) {
          if (f->live.empty()) {
            each(copy.ranges()[i]);
            continue;
          }
          while (wait_for_update && i == 1) {
            if (const std::lock_guard<std::mutex> lock(f->mu); f->frozen) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          {
            const std::lock_guard<std::mutex> lock(f->mu);
            f->next = i;
          }
          each(f->live[i]);
        }
        const std::lock_guard<std::mutex> lock(f->mu);
        f->next = f->live.size();
      };
      // A chunk of the engine's memory is read with `mu` held: the update waits at most for it.
      ckpt::ChunkSource chunks;
      if (!f->live.empty()) {
        chunks.acquire = [f, &copy](const float* p, size_t n) {
          std::unique_lock<std::mutex> lock(f->mu);
          const float* at = f->source(copy, p, n);
          lock.release();  // held until chunks.release
          return at;
        };
        chunks.release = [f] { f->mu.unlock(); };
      }
      f->file = write_own_file(f->save, ctx, rank, N, visit, std::move(chunks));
    } catch (const std::exception& e) {
      f->error = fmt::format("rank {}, writing its file of the checkpoint of step {} in the background: {}", rank,
                             f->save.step, e.what());
    }
    f->done.store(true, std::memory_order_release);
  });
  in_flight_ = std::move(f);
}

void CheckpointSaver::finish() {
  if (in_flight_) commit();
  join_removal();
}

void CheckpointSaver::commit() {
  InFlight& f = *in_flight_;
  freeze();  // the end of the run: what the writer has not read is copied rather than waited for
  if (f.writer.joinable()) f.writer.join();
  comm::Communicator& comm = engine_.comm();
  if (const std::optional<std::string> e = first_error(comm, f.error)) {
    in_flight_.reset();
    throw RuntimeFailure(*e);
  }
  join_removal();  // the commit sweeps what is left of earlier removals
  std::vector<std::string> retired;
  commit_save(comm, f.save, f.file, ctx_, &retired);
  in_flight_.reset();
  start_removal(std::move(retired));
}

void CheckpointSaver::start_removal(std::vector<std::string> dirs) {
  if (dirs.empty()) return;
  removal_ = std::thread([dirs = std::move(dirs)] {
    try {
      ckpt::remove_dirs(dirs);
    } catch (const std::exception& e) {
      log::warn("{} (the next save's commit tries again)", e.what());
    }
  });
}

void CheckpointSaver::join_removal() {
  if (removal_.joinable()) removal_.join();
}

}  // namespace zerodp::train
