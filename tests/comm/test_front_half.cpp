// The front half of Communicator (comm/communicator.h) over a backend that only records what it is
// handed: each rule's message, the in-place forms, the traffic ledger, the byte element type and the
// routing of host buffers to a device backend's host group. No MPI: the rules are the same for
// every backend, and a refused collective must reach no transport.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"
#include "error_message.h"

namespace zerodp::comm {
namespace {

// Records every collective it is handed; with a host group, buffers in `device` count as device memory.
class RecordingBackend final : public Communicator {
 public:
  RecordingBackend(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "recording"; }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  std::unique_ptr<Communicator> split_by_host() override { return nullptr; }

  std::vector<Collective> started;
  int barriers = 0;
  RecordingBackend* host = nullptr;
  std::vector<char>* device = nullptr;

 protected:
  WorkPtr start(const Collective& c) override {
    started.push_back(c);
    return std::make_shared<DoneWork>();
  }
  WorkPtr start_barrier() override {
    ++barriers;
    return std::make_shared<DoneWork>();
  }
  Communicator* host_group() override { return host; }
  bool is_device_memory(const void* p) const override {
    const char* q = static_cast<const char*>(p);
    return device != nullptr && q >= device->data() && q < device->data() + device->size();
  }

 private:
  int rank_, size_;
};

// The message of the RuntimeFailure `issue` throws, or "" if it throws none.
template <class F>
std::string refusal(F&& issue) {
  return zerodp::testing::error_message<RuntimeFailure>(issue);
}

TEST(FrontHalf, EachRuleHasItsMessageNamingTheCollectiveAndTheGroup) {
  RecordingBackend c(1, 4);
  std::vector<float> buf(64);
  const std::string root = refusal([&] { c.broadcast(buf.data(), 4, DType::kF32, 4); });
  EXPECT_NE(root.find("broadcast(count=4, dtype=fp32, root=4) in a group of 4 ranks (rank 1)"), std::string::npos)
      << root;
  EXPECT_NE(root.find("root 4 is not a rank of the group (0 to 3)"), std::string::npos) << root;
  EXPECT_NE(refusal([&] { c.broadcast(buf.data(), 4, DType::kF32, -1); }).find("root -1"), std::string::npos);

  const std::string null_ar = refusal([&] { c.all_reduce(nullptr, 4, DType::kBF16); });
  EXPECT_NE(null_ar.find("all_reduce(count=4, dtype=bf16, op=sum, in place)"), std::string::npos) << null_ar;
  EXPECT_NE(null_ar.find("a buffer is null"), std::string::npos) << null_ar;
  // Every broadcast checks its buffer, the byte one included.
  EXPECT_NE(refusal([&] { c.broadcast_bytes(nullptr, 3, 0); }).find("a buffer is null"), std::string::npos);
  EXPECT_NE(refusal([&] { c.all_gather(nullptr, buf.data(), 2, DType::kF32); }).find("a buffer is null"),
            std::string::npos);

  const std::string bytes = refusal([&] { c.all_reduce(buf.data(), 8, kByte, ReduceOp::kMax); });
  EXPECT_NE(bytes.find("all_reduce(count=8, dtype=byte, op=max"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("bytes cannot be reduced"), std::string::npos) << bytes;

  float* wrong = buf.data() + 2 * 4 + 1;  // overlapping, not at rank·count
  const std::string rs = refusal([&] { c.reduce_scatter(buf.data(), wrong, 4, DType::kF32); });
  EXPECT_NE(rs.find("reduce_scatter(count=4, dtype=fp32, op=sum) in a group of 4 ranks (rank 1)"), std::string::npos)
      << rs;
  EXPECT_NE(rs.find("recv overlaps send without being send + rank·count"), std::string::npos) << rs;
  const std::string ag = refusal([&] { c.all_gather(wrong, buf.data(), 4, DType::kF32); });
  EXPECT_NE(ag.find("send overlaps recv without being recv + rank·count"), std::string::npos) << ag;

  EXPECT_TRUE(c.started.empty()) << "a refused collective reaches no transport";
  EXPECT_EQ(c.traffic().total_bytes_sent(), 0u);
}

TEST(FrontHalf, InPlaceFormsAndEmptyCollectivesPass) {
  TrafficLedger ledger;
  RecordingBackend c(2, 4);
  c.set_traffic_ledger(&ledger);
  std::vector<float> buf(16);
  c.reduce_scatter(buf.data(), buf.data() + 2 * 4, 4, DType::kF32);
  c.all_gather(buf.data() + 2 * 4, buf.data(), 4, DType::kF32);
  c.reduce_scatter(buf.data(), buf.data(), 0, DType::kF32);  // no elements: nothing can overlap
  c.all_reduce(nullptr, 0, DType::kF32);
  ASSERT_EQ(c.started.size(), 4u);
  EXPECT_TRUE(c.started[0].in_place);
  EXPECT_TRUE(c.started[1].in_place);
  EXPECT_FALSE(c.started[2].in_place);
  EXPECT_EQ(c.started[0].recv, buf.data() + 8);
}

TEST(FrontHalf, TypedAndByteCollectivesRecordTheSameTraffic) {
  TrafficLedger typed, bytes;
  RecordingBackend a(0, 4), b(0, 4);
  a.set_traffic_ledger(&typed);
  b.set_traffic_ledger(&bytes);
  std::vector<float> send(8), recv(32);
  a.all_gather(send.data(), recv.data(), 8, DType::kF32);
  b.all_gather_bytes(send.data(), recv.data(), 8 * sizeof(float));
  a.broadcast(send.data(), 6, DType::kF16, 3);
  b.broadcast_bytes(send.data(), 12, 3);
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kBroadcast}) {
    EXPECT_EQ(typed.bytes_sent(k), bytes.bytes_sent(k)) << collective_name(k);
    EXPECT_EQ(typed.calls(k), 1u) << collective_name(k);
  }
  EXPECT_EQ(typed.bytes_sent(CollectiveKind::kAllGather), ring_bytes_sent(CollectiveKind::kAllGather, 128, 4));
  ASSERT_EQ(b.started.size(), 2u);
  EXPECT_TRUE(b.started[0].type.is_byte());
  EXPECT_EQ(b.started[0].type.size(), 1u);
  EXPECT_EQ(b.started[0].count, 32u);
  // A barrier moves no payload: it goes to the transport and records nothing.
  a.barrier();
  EXPECT_EQ(a.barriers, 1);
  EXPECT_EQ(typed.calls(CollectiveKind::kAllReduce), 0u);
}

TEST(FrontHalf, HostBuffersOfADeviceBackendGoToItsHostGroup) {
  TrafficLedger ledger, host_ledger;
  RecordingBackend host(1, 2), dev(1, 2);
  std::vector<char> device_memory(256);
  dev.host = &host;
  dev.device = &device_memory;
  dev.set_traffic_ledger(&ledger);
  host.set_traffic_ledger(&host_ledger);
  std::vector<float> on_host(8);
  float* on_device = reinterpret_cast<float*>(device_memory.data());

  dev.all_reduce(on_host.data(), 8, DType::kF32);
  dev.all_reduce(on_device, 8, DType::kF32);
  ASSERT_EQ(host.started.size(), 1u);
  EXPECT_EQ(host.started[0].recv, on_host.data());
  ASSERT_EQ(dev.started.size(), 1u);
  EXPECT_EQ(dev.started[0].recv, on_device);
  // Both recorded once, in the device backend's ledger; the host group's records nothing.
  EXPECT_EQ(ledger.calls(CollectiveKind::kAllReduce), 2u);
  EXPECT_EQ(host_ledger.total_bytes_sent(), 0u);

  const std::string mixed = refusal([&] { dev.all_gather(on_host.data(), on_device, 2, DType::kF32); });
  EXPECT_NE(mixed.find("all_gather(count=2, dtype=fp32) in a group of 2 ranks (rank 1)"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("host and device buffers in one collective"), std::string::npos) << mixed;
  EXPECT_EQ(ledger.calls(CollectiveKind::kAllGather), 0u);
}

TEST(ElementType, ConvertsFromDTypeAndNamesBytes) {
  const ElementType bf16 = DType::kBF16;
  EXPECT_EQ(bf16.dtype(), DType::kBF16);
  EXPECT_EQ(bf16.size(), 2u);
  EXPECT_FALSE(bf16.is_byte());
  EXPECT_STREQ(bf16.name(), "bf16");
  EXPECT_TRUE(kByte.is_byte());
  EXPECT_EQ(kByte.size(), 1u);
  EXPECT_STREQ(kByte.name(), "byte");
  EXPECT_FALSE(kByte == ElementType(DType::kF32));
}

}  // namespace
}  // namespace zerodp::comm
