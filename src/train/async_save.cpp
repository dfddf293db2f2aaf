#include "train/async_save.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

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
};

CheckpointSaver::CheckpointSaver(zero::Engine& engine, SaveContext ctx, bool async)
    : engine_(engine), ctx_(std::move(ctx)), async_(async) {
  if (async_ && writes_checkpoint_file(engine_)) copy_ = zero::StateCopy::allocate(engine_);  // only writers hold one
}

CheckpointSaver::~CheckpointSaver() {
  if (in_flight_ && in_flight_->writer.joinable()) in_flight_->writer.join();
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
  finish();
  if (!async_) {
    save_checkpoint(engine_, step, ctx_);
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
  copy_.refresh(engine_);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  log::info("checkpoint of step {}: state copied to host memory in {:.0f} ms, writing it while training goes on",
            step, ms);
  const int rank = engine_.comm().rank(), N = engine_.shard_group_size();
  // The writer reads the copy and the context only, and calls no collective (the communicator is the
  // main thread's); a failure is kept for the commit, which every rank reaches.
  f->writer = std::thread([f = f.get(), &copy = copy_, &ctx = ctx_, rank, N] {
    try {
      f->file = write_own_file(f->save, ctx, rank, N, [&copy](const auto& each) {
        for (const zero::Engine::OwnedRange& r : copy.ranges()) each(r);
      });
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
}

void CheckpointSaver::commit() {
  InFlight& f = *in_flight_;
  if (f.writer.joinable()) f.writer.join();
  comm::Communicator& comm = engine_.comm();
  if (const std::optional<std::string> e = first_error(comm, f.error)) {
    in_flight_.reset();
    throw RuntimeFailure(*e);
  }
  commit_save(comm, f.save, f.file, ctx_);
  in_flight_.reset();
}

}  // namespace zerodp::train
