#include "comm/communicator.h"

#include <iterator>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::comm {

const char* reduce_op_name(ReduceOp op) {
  static constexpr const char* kNames[] = {"sum", "avg", "max"};
  const auto i = static_cast<size_t>(op);
  return i < std::size(kNames) ? kNames[i] : "?";
}

const char* ElementType::name() const { return is_byte() ? "byte" : dtype_name(dtype()); }

std::string describe(const Collective& c, int group_size, int rank) {
  std::string args = fmt::format("count={}, dtype={}", c.count, c.type.name());
  if (c.kind == CollectiveKind::kBroadcast) args += fmt::format(", root={}", c.root);
  if (c.is_reduction()) args += fmt::format(", op={}", reduce_op_name(c.op));
  if (c.in_place) args += ", in place";
  return fmt::format("{}({}) in a group of {} ranks (rank {})", collective_name(c.kind), args, group_size, rank);
}

namespace {

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace

// ---- the front half ---------------------------------------------------------------------------

WorkPtr Communicator::broadcast_async(void* buf, size_t count, ElementType type, int root) {
  return issue({.kind = CollectiveKind::kBroadcast, .recv = buf, .count = count, .type = type, .root = root});
}

WorkPtr Communicator::all_reduce_async(void* buf, size_t count, ElementType type, ReduceOp op) {
  return issue({.kind = CollectiveKind::kAllReduce, .recv = buf, .count = count, .type = type, .op = op});
}

WorkPtr Communicator::reduce_scatter_async(const void* send, void* recv, size_t count, ElementType type, ReduceOp op) {
  return issue(
      {.kind = CollectiveKind::kReduceScatter, .send = send, .recv = recv, .count = count, .type = type, .op = op});
}

WorkPtr Communicator::reduce_scatter_quantized_async(const void* send, void* recv, size_t count, ElementType type,
                                                     ReduceOp op) {
  return issue({.kind = CollectiveKind::kReduceScatter, .send = send, .recv = recv, .count = count, .type = type,
                .op = op, .quantize_across_hosts = true});
}

WorkPtr Communicator::all_gather_async(const void* send, void* recv, size_t count, ElementType type) {
  return issue({.kind = CollectiveKind::kAllGather, .send = send, .recv = recv, .count = count, .type = type});
}

// The in-place forms of comm/communicator.h's semantics: all_reduce and broadcast have one buffer
// (broadcast's is not called in place: nothing is read and written by the same rank);
// reduce_scatter's recv is send + rank·count, all_gather's send is recv + rank·count.
bool Communicator::in_place_form(const Collective& c) const {
  const size_t mine = static_cast<size_t>(rank()) * c.chunk_bytes();
  switch (c.kind) {
    case CollectiveKind::kAllReduce: return true;
    case CollectiveKind::kBroadcast: return false;
    case CollectiveKind::kReduceScatter:
      return c.count > 0 && c.send != nullptr && static_cast<const char*>(c.send) + mine == c.recv;
    case CollectiveKind::kAllGather:
      return c.count > 0 && c.recv != nullptr && static_cast<const char*>(c.recv) + mine == c.send;
  }
  return false;
}

WorkPtr Communicator::issue(Collective c) {
  c.in_place = in_place_form(c);
  check(c);
  WorkPtr work = goes_to_host_group(c) ? start_on(*host_group(), c) : start(c);
  const uint64_t across =
      hosts_.spans_hosts()
          ? bytes_across_hosts(hosts_, c.kind, c.count, c.type.size(), rank(),
                               runs_in_two_levels(hosts_, c.kind, c.is_reduction() && c.op != ReduceOp::kMax, c.count),
                               c.quantize_across_hosts)
          : 0;
  traffic_->record(c.kind, ledger_full_bytes(c.kind, c.count, c.type.size(), size()), size(),
                   successor_in_other_group_, across);
  return work;
}

// Each rule once, each with its own message: what was issued, where, and what is wrong with it.
void Communicator::check(const Collective& c) const {
  const auto refuse = [&](const std::string& rule) {
    throw RuntimeFailure(fmt::format("{}: {}", describe(c, size(), rank()), rule));
  };
  if (c.kind == CollectiveKind::kBroadcast && (c.root < 0 || c.root >= size()))
    refuse(fmt::format("root {} is not a rank of the group (0 to {})", c.root, size() - 1));
  if (c.is_reduction() && c.type.is_byte()) refuse("bytes cannot be reduced (reductions take fp32, bf16 or fp16)");
  const bool has_send = c.kind == CollectiveKind::kReduceScatter || c.kind == CollectiveKind::kAllGather;
  if (c.count > 0 && (c.recv == nullptr || (has_send && c.send == nullptr))) refuse("a buffer is null");
  if (c.count == 0 || c.in_place) return;
  const size_t chunk = c.chunk_bytes(), all = chunk * static_cast<size_t>(size());
  if (c.kind == CollectiveKind::kReduceScatter && overlaps(c.send, all, c.recv, chunk))
    refuse("recv overlaps send without being send + rank·count (the in-place form)");
  if (c.kind == CollectiveKind::kAllGather && overlaps(c.send, chunk, c.recv, all))
    refuse("send overlaps recv without being recv + rank·count (the in-place form)");
}

bool Communicator::goes_to_host_group(const Collective& c) {
  if (host_group() == nullptr) return false;
  int host = 0, device = 0;
  for (const void* p : {c.send, static_cast<const void*>(c.recv)}) {
    if (p != nullptr) (is_device_memory(p) ? device : host) += 1;
  }
  if (host > 0 && device > 0)
    throw RuntimeFailure(
        fmt::format("{}: host and device buffers in one collective", describe(c, size(), rank())));
  return host > 0;
}

}  // namespace zerodp::comm
