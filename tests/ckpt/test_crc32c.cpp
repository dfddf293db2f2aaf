// CRC-32C: the published check values (RFC 3720 B.4 and the usual "123456789"), streaming in pieces
// equals one pass, and the crc32 instruction agrees with the table-driven loop at every length and
// alignment.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ckpt/crc32c.h"

namespace zerodp::ckpt {
namespace {

TEST(Crc32c, KnownValues) {
  const std::string digits = "123456789";
  EXPECT_EQ(crc32c(digits.data(), digits.size()), 0xE3069283u);
  EXPECT_EQ(crc32c_extend_portable(0, digits.data(), digits.size()), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  EXPECT_EQ(crc32c("a", 1), 0xC1D04330u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    down[static_cast<size_t>(i)] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down.data(), 32), 0x113FDB5Cu);
}

TEST(Crc32c, ExtendingEqualsOnePass) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(10007);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint32_t whole = crc32c(data.data(), data.size());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{4099}, data.size()}) {
    const uint32_t a = crc32c(data.data(), cut);
    EXPECT_EQ(crc32c_extend(a, data.data() + cut, data.size() - cut), whole) << "cut at " << cut;
  }
  // A one-bit change changes it.
  data[5000] ^= 0x10;
  EXPECT_NE(crc32c(data.data(), data.size()), whole);
}

TEST(Crc32c, HardwareAgreesWithTables) {
  std::mt19937 rng(11);
  std::vector<uint8_t> data(300);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t offset = 0; offset < 9; ++offset)
    for (size_t n = 0; n + offset <= data.size(); n += 13)
      ASSERT_EQ(crc32c_extend(0x12345678u, data.data() + offset, n),
                crc32c_extend_portable(0x12345678u, data.data() + offset, n))
          << "offset " << offset << " length " << n;
  RecordProperty("hardware_crc32c", crc32c_hardware() ? "yes" : "no");
}

// Long inputs take the three-stripe path (12 KiB a round); its joins must give the serial CRC at
// every length around the rounds' edges.
TEST(Crc32c, ThreeStripesAgreeWithTables) {
  std::mt19937 rng(13);
  std::vector<uint8_t> data(3 * 3 * 4096 + 40);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t n : {size_t{3 * 4096 - 1}, size_t{3 * 4096}, size_t{3 * 4096 + 1}, size_t{3 * 4096 + 9},
                   size_t{6 * 4096}, size_t{6 * 4096 + 13}, data.size() - 3})
    for (size_t offset : {size_t{0}, size_t{3}})
      ASSERT_EQ(crc32c_extend(0xCAFEF00Du, data.data() + offset, n),
                crc32c_extend_portable(0xCAFEF00Du, data.data() + offset, n))
          << "offset " << offset << " length " << n;
}

}  // namespace
}  // namespace zerodp::ckpt
