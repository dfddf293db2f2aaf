// --device: parsing, and the usage error a request the process cannot serve gets.
#include <gtest/gtest.h>

#include "core/error.h"
#include "device/select.h"
#if ZERODP_WITH_CUDA
#include "cuda/runtime.h"
#include "device/cuda_device.h"
#endif

namespace zerodp::device {
namespace {

TEST(DeviceSelect, ParsesCpuCudaAndOrdinals) {
  EXPECT_EQ(parse_device_spec("cpu").kind, DeviceSpec::Kind::kCpu);
  EXPECT_EQ(parse_device_spec("cuda").kind, DeviceSpec::Kind::kCuda);
  EXPECT_EQ(parse_device_spec("cuda").ordinal, -1);
  EXPECT_EQ(parse_device_spec("cuda:3").ordinal, 3);
  for (const char* name : {"cpu", "cuda", "cuda:0", "cuda:12"})
    EXPECT_EQ(device_spec_name(parse_device_spec(name)), name);
}

TEST(DeviceSelect, RejectsAnythingElseNamingTheFlag) {
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "cuda:99999", " cpu"}) {
    try {
      parse_device_spec(bad, "--device");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--device: expected cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
  // A long value is cut in the message, not echoed whole.
  try {
    parse_device_spec(std::string(5000, 'x'));
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u);
  }
}

// Answered from the spec alone, before any device is opened, with or without CUDA in the build.
TEST(DeviceSelect, SaysWhichComputeTypesADeviceSupports) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) EXPECT_TRUE(supports(parse_device_spec("cpu"), t));
  for (const char* gpu : {"cuda", "cuda:1"}) {
    EXPECT_FALSE(supports(parse_device_spec(gpu), DType::kF32)) << gpu;
    EXPECT_TRUE(supports(parse_device_spec(gpu), DType::kBF16)) << gpu;
    EXPECT_TRUE(supports(parse_device_spec(gpu), DType::kF16)) << gpu;
  }
}

TEST(DeviceSelect, CpuIsAlwaysTrainable) { EXPECT_NO_THROW(require_trainable(parse_device_spec("cpu"))); }

// cuda is refused with a usage error when it cannot be served (no GPU, no CUDA in the build, an
// ordinal past the last GPU), saying which; on a machine with a GPU 0 it is accepted.
TEST(DeviceSelect, CudaIsRefusedOnlySayingWhy) {
  try {
    require_trainable(parse_device_spec("cuda:0"));
#if ZERODP_WITH_CUDA
    EXPECT_FALSE(cuda::query_runtime().gpus.empty()) << "--device cuda:0 was accepted without a GPU";
#else
    ADD_FAILURE() << "--device cuda:0 was accepted by a build without CUDA";
#endif
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--device cuda:0"), std::string::npos) << m;
    EXPECT_TRUE(m.find("no GPU is visible") != std::string::npos || m.find("built without CUDA") != std::string::npos ||
                m.find("visible (ordinals") != std::string::npos)
        << m;
  }
}

#if ZERODP_WITH_CUDA
// The CUDA kernels with no device behind them size the planner's activations on a machine without a
// GPU, and refuse to compute (they have no stream) rather than reach for some device's.
TEST(CudaKernelsSizing, SizesWithoutAGpuAndComputesNothing) {
  const ModelKernels<bf16>& k = cuda_model_kernels<bf16>();
  const kernels::AttentionShape shape = kernels::AttentionShape::mha(2, 8, 48, 3);
  EXPECT_EQ(k.attention_saved_bytes(shape), size_t{2} * 3 * 8 * sizeof(float));
  EXPECT_EQ(k.attention_scratch_bytes(shape), size_t{2} * 3 * 8 * sizeof(float));
  EXPECT_THROW(k.residual_forward(nullptr, nullptr, nullptr, 0), RuntimeFailure);
}
#endif

}  // namespace
}  // namespace zerodp::device
