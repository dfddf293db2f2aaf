// The GPU communicators under `mpirun -n 2`: each rank on GPU rank % device_count, so on one GPU the
// ranks share it (host staging) and on two or more each has its own (NCCL). Whatever the machine, the
// staged communicator is tested too. Every result is compared bit for bit with the MPI backend's on
// the same host data, and the traffic ledger with the MPI backend's.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/runtime.h"
#include "comm/staged_communicator.h"
#include "comm/traffic.h"
#include "core/dtype.h"

namespace zerodp::comm {
namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(expr)

Communicator& world() {
  static std::shared_ptr<Communicator> w = comm::world();  // starts MPI (gpu_main does not)
  return *w;
}

int my_device() {
  int n = 0;
  cudaGetDeviceCount(&n);
  return world().rank() % (n > 0 ? n : 1);
}

// The communicators under test, made once (their construction is collective).
std::vector<std::unique_ptr<Communicator>> owned;
std::vector<Communicator*>& gpu_comms() {
  static std::vector<Communicator*> comms;
  if (owned.empty()) {
    cudaSetDevice(my_device());
    owned.push_back(make_gpu_communicator(world(), my_device()));
    owned.push_back(StagedCommunicator::create(world(), my_device()));  // staging, whatever the machine
    for (auto& c : owned) comms.push_back(c.get());
    if (world().rank() == 0) std::printf("GPU communicators: %s and staged\n", owned[0]->backend().c_str());
  }
  return comms;
}

// Values whose rank-order sum differs from other orders: magnitudes spread over many binades.
std::vector<uint8_t> make_values(size_t count, DType dtype, int rank, uint32_t salt) {
  std::vector<uint8_t> out(count * dtype_size(dtype));
  for (size_t i = 0; i < count; ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (static_cast<uint32_t>(rank) + 1) * 40503u ^ salt;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    const float sign = (h & 1) ? -1.0f : 1.0f;
    const float v = sign * static_cast<float>(h % 10007) / 97.0f * static_cast<float>(1u << ((h >> 8) % 12));
    if (dtype == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      const uint16_t b = dtype == DType::kBF16 ? fp32_to_bf16(v) : fp32_to_fp16(v / 4096.0f);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : bytes(bytes) { cudaMalloc(&p, bytes > 0 ? bytes : 1); }
  ~DeviceBuffer() { cudaFree(p); }
  void put(const std::vector<uint8_t>& h) { cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice); }
  std::vector<uint8_t> get() const {
    std::vector<uint8_t> h(bytes);
    cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost);
    return h;
  }
  char* c() const { return static_cast<char*>(p); }
  void* p = nullptr;
  size_t bytes;
};

// gpu_main calls no MPI: the communicators go, then MPI is finalized, after the last test.
class FinalizeMpi : public ::testing::Environment {
 public:
  void TearDown() override {
    owned.clear();
    if (runtime_initialized()) finalize();
  }
};
const auto* const kFinalize = ::testing::AddGlobalTestEnvironment(new FinalizeMpi);

const DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

TEST(GpuComm, ReduceScatterEqualsMpiBitForBit) {
  const int W = world().size(), r = world().rank();
  for (Communicator* g : gpu_comms()) {
    for (DType dt : kDtypes) {
      for (ReduceOp op : kOps) {
        for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, size_t{65537}}) {
          const size_t es = dtype_size(dt), chunk = count * es;
          std::vector<uint8_t> send = make_values(count * W, dt, r, 1);
          std::vector<uint8_t> ref(chunk);
          world().reduce_scatter(send.data(), ref.data(), count, dt, op);

          DeviceBuffer dsend(send.size()), drecv(chunk);
          dsend.put(send);
          g->reduce_scatter(dsend.p, drecv.p, count, dt, op);
          EXPECT_EQ(drecv.get(), ref) << g->backend() << " " << dtype_name(dt) << " " << reduce_op_name(op) << " " << count;
          EXPECT_EQ(dsend.get(), send) << "out of place leaves send as it was";

          dsend.put(send);  // in place: recv = send + rank·count
          g->reduce_scatter(dsend.p, dsend.c() + r * chunk, count, dt, op);
          const std::vector<uint8_t> got = dsend.get();
          EXPECT_EQ(std::vector<uint8_t>(got.begin() + r * chunk, got.begin() + (r + 1) * chunk), ref)
              << g->backend() << " in place " << dtype_name(dt) << " " << reduce_op_name(op) << " " << count;
        }
      }
    }
  }
}

TEST(GpuComm, AllReduceEqualsMpiBitForBit) {
  const int r = world().rank();
  for (Communicator* g : gpu_comms()) {
    for (DType dt : kDtypes) {
      for (ReduceOp op : kOps) {
        // Counts that W divides (gathered in place) and that it does not (short and empty chunks).
        for (size_t count : {size_t{1}, size_t{5}, size_t{1001}, size_t{4096}, size_t{300001}}) {
          std::vector<uint8_t> data = make_values(count, dt, r, 2);
          std::vector<uint8_t> ref = data;
          world().all_reduce(ref.data(), count, dt, op);
          DeviceBuffer d(data.size());
          d.put(data);
          g->all_reduce(d.p, count, dt, op);
          EXPECT_EQ(d.get(), ref) << g->backend() << " " << dtype_name(dt) << " " << reduce_op_name(op) << " " << count;
        }
      }
    }
  }
}

TEST(GpuComm, AllReduceOfABucketEqualsReduceScattersOfItsParts) {
  // The property ZeRO's stages rest on, on the GPU: same bits from either collective.
  const int W = world().size(), r = world().rank();
  const size_t count = 4096 * W;
  for (Communicator* g : gpu_comms()) {
    std::vector<uint8_t> data = make_values(count, DType::kBF16, r, 3);
    DeviceBuffer a(data.size()), b(data.size()), part(data.size() / W);
    a.put(data);
    b.put(data);
    g->all_reduce(a.p, count, DType::kBF16, ReduceOp::kAvg);
    g->reduce_scatter(b.p, part.p, count / W, DType::kBF16, ReduceOp::kAvg);
    const std::vector<uint8_t> all = a.get(), mine = part.get();
    EXPECT_EQ(std::vector<uint8_t>(all.begin() + r * mine.size(), all.begin() + (r + 1) * mine.size()), mine);
  }
}

TEST(GpuComm, AllGatherAndBroadcastMoveBytesExactly) {
  const int W = world().size(), r = world().rank();
  for (Communicator* g : gpu_comms()) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const size_t count = 777, chunk = count * dtype_size(dt);
      std::vector<uint8_t> expect;
      for (int q = 0; q < W; ++q) {
        const auto v = make_values(count, dt, q, 4);
        expect.insert(expect.end(), v.begin(), v.end());
      }
      const std::vector<uint8_t> mine(expect.begin() + r * chunk, expect.begin() + (r + 1) * chunk);
      DeviceBuffer send(chunk), recv(chunk * W);
      send.put(mine);
      g->all_gather(send.p, recv.p, count, dt);
      EXPECT_EQ(recv.get(), expect) << g->backend();
      DeviceBuffer inplace(chunk * W);  // in place: send = recv + rank·count
      cudaMemset(inplace.p, 0, chunk * W);
      cudaMemcpy(inplace.c() + r * chunk, mine.data(), chunk, cudaMemcpyHostToDevice);
      g->all_gather(inplace.c() + r * chunk, inplace.p, count, dt);
      EXPECT_EQ(inplace.get(), expect) << g->backend() << " in place";

      DeviceBuffer bytes(W * 13);
      std::vector<uint8_t> tag(13, static_cast<uint8_t>(0xA0 + r));
      cudaMemcpy(bytes.c() + r * 13, tag.data(), 13, cudaMemcpyHostToDevice);
      g->all_gather_bytes(bytes.c() + r * 13, bytes.p, 13);
      const std::vector<uint8_t> all = bytes.get();
      for (int q = 0; q < W; ++q) EXPECT_EQ(all[q * 13 + 12], 0xA0 + q);

      for (int root = 0; root < W; ++root) {
        const std::vector<uint8_t> from_root = make_values(count, dt, root, 5);
        DeviceBuffer b(chunk);
        b.put(r == root ? from_root : make_values(count, dt, r, 6));
        g->broadcast(b.p, count, dt, root);
        EXPECT_EQ(b.get(), from_root) << g->backend() << " root " << root;
        b.put(r == root ? from_root : std::vector<uint8_t>(chunk, 0));
        g->broadcast_bytes(b.p, chunk, root);
        EXPECT_EQ(b.get(), from_root) << g->backend() << " bytes, root " << root;
      }
    }
    g->barrier();
  }
}

TEST(GpuComm, HostBuffersGoThroughMpi) {
  const int r = world().rank();
  for (Communicator* g : gpu_comms()) {
    std::vector<uint8_t> data = make_values(100, DType::kF32, r, 7), ref = data;
    world().all_reduce(ref.data(), 100, DType::kF32, ReduceOp::kSum);
    g->all_reduce(data.data(), 100, DType::kF32, ReduceOp::kSum);
    EXPECT_EQ(data, ref) << g->backend();
  }
}

TEST(GpuComm, TrafficLedgerMatchesMpi) {
  const int W = world().size();
  for (Communicator* g : gpu_comms()) {
    TrafficLedger gpu_ledger, mpi_ledger;
    const size_t count = 1001;
    std::vector<uint8_t> h(count * W * 4);
    DeviceBuffer d(h.size()), e(h.size());
    cudaMemset(d.p, 0, h.size());
    g->set_traffic_ledger(&gpu_ledger);
    world().set_traffic_ledger(&mpi_ledger);
    for (DType dt : {DType::kF32, DType::kBF16}) {
      g->all_reduce(d.p, count, dt, ReduceOp::kSum);
      world().all_reduce(h.data(), count, dt, ReduceOp::kSum);
      g->reduce_scatter(d.p, e.p, count, dt, ReduceOp::kAvg);
      std::vector<uint8_t> hr(count * 4);
      world().reduce_scatter(h.data(), hr.data(), count, dt, ReduceOp::kAvg);
      g->all_gather(d.p, e.p, count, dt);
      std::vector<uint8_t> hg(count * W * 4);
      world().all_gather(h.data(), hg.data(), count, dt);
      g->broadcast(d.p, count, dt, 0);
      world().broadcast(h.data(), count, dt, 0);
      g->broadcast_bytes(d.p, 17, 0);
      world().broadcast_bytes(h.data(), 17, 0);
    }
    world().set_traffic_ledger(&TrafficLedger::global());
    g->set_traffic_ledger(&TrafficLedger::global());
    for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
                             CollectiveKind::kBroadcast}) {
      EXPECT_EQ(gpu_ledger.bytes_sent(k), mpi_ledger.bytes_sent(k)) << g->backend() << " " << collective_name(k);
      EXPECT_EQ(gpu_ledger.calls(k), mpi_ledger.calls(k)) << g->backend() << " " << collective_name(k);
      EXPECT_GT(gpu_ledger.bytes_sent(k), 0u) << collective_name(k);
    }
  }
}

__global__ void spin_then_fill(float* out, size_t n, float value, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = value;
}

TEST(GpuComm, AsyncCollectiveIsOrderedAfterComputeAndOverlapsLaterCompute) {
  const int W = world().size(), r = world().rank();
  cudaStream_t compute;
  CUDA_OK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  for (Communicator* g : gpu_comms()) {
    if (auto* n = dynamic_cast<NcclCommunicator*>(g)) n->set_compute_stream(compute);
    if (auto* s = dynamic_cast<StagedCommunicator*>(g)) s->set_compute_stream(compute);
    const size_t count = 1 << 20;
    DeviceBuffer grads(count * 4), other(count * 4);
    // A slow kernel writes the buffer; the collective issued after it must see its values.
    spin_then_fill<<<64, 256, 0, compute>>>(static_cast<float*>(grads.p), count, float(r + 1), 200000000LL);
    WorkPtr work = g->all_reduce_async(grads.p, count, DType::kF32, ReduceOp::kSum);
    // Compute enqueued after the issue runs while the collective is in flight.
    spin_then_fill<<<64, 256, 0, compute>>>(static_cast<float*>(other.p), count, 7.0f, 20000000LL);
    work->wait();
    work->wait();  // a second wait is harmless
    CUDA_OK(cudaStreamSynchronize(compute));
    EXPECT_TRUE(work->is_completed());
    std::vector<float> h(count);
    CUDA_OK(cudaMemcpy(h.data(), grads.p, count * 4, cudaMemcpyDeviceToHost));
    const float expect = static_cast<float>(W * (W + 1) / 2);
    size_t bad = 0;
    for (float x : h) bad += x != expect;
    EXPECT_EQ(bad, 0u) << g->backend() << ": elements not equal to " << expect;
    if (auto* n = dynamic_cast<NcclCommunicator*>(g)) n->set_compute_stream(nullptr);
    if (auto* s = dynamic_cast<StagedCommunicator*>(g)) s->set_compute_stream(nullptr);
  }
  CUDA_OK(cudaStreamDestroy(compute));
}

TEST(GpuComm, SplitsWork) {
  const int r = world().rank();
  for (Communicator* g : gpu_comms()) {
    std::unique_ptr<Communicator> self = g->split(r, 0);  // one rank per group
    ASSERT_NE(self, nullptr);
    EXPECT_EQ(self->size(), 1);
    EXPECT_EQ(self->backend(), g->backend());
    DeviceBuffer d(16);
    d.put(make_values(4, DType::kF32, r, 8));
    self->all_reduce(d.p, 4, DType::kF32, ReduceOp::kAvg);
    EXPECT_EQ(d.get(), make_values(4, DType::kF32, r, 8));
    EXPECT_EQ(g->split(-1, 0), nullptr);
  }
}

}  // namespace
}  // namespace zerodp::comm
