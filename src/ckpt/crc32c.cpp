#include "ckpt/crc32c.h"

#include <array>
#include <cstring>

namespace zerodp::ckpt {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed: the CRC runs LSB first

// table[k][b]: the CRC contribution of byte b followed by k zero bytes (slicing-by-8: eight table
// look-ups fold eight input bytes into the register at once).
using Tables = std::array<std::array<uint32_t, 256>, 8>;
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}
constexpr Tables kTables = make_tables();

// The register between the initial and final inversion.
uint32_t raw_portable(uint32_t c, const uint8_t* p, size_t n) {
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian host: byte 0 is the lowest
    const uint32_t lo = static_cast<uint32_t>(word) ^ c, hi = static_cast<uint32_t>(word >> 32);
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFF];
  return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZERODP_CRC32C_X86 1
// SSE 4.2's crc32 instruction is exactly this CRC (Castagnoli, reflected), 8 bytes per step.
__attribute__((target("sse4.2"))) uint32_t raw_hardware(uint32_t c, const uint8_t* p, size_t n) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = __builtin_ia32_crc32di(c64, word);
    p += 8;
    n -= 8;
  }
  c = static_cast<uint32_t>(c64);
  while (n-- > 0) c = __builtin_ia32_crc32qi(c, *p++);
  return c;
}
bool detect_hardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

}  // namespace

bool crc32c_hardware() {
#ifdef ZERODP_CRC32C_X86
  static const bool has = detect_hardware();
  return has;
#else
  return false;
#endif
}

uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n) {
  return ~raw_portable(~crc, static_cast<const uint8_t*>(data), n);
}

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
#ifdef ZERODP_CRC32C_X86
  if (crc32c_hardware()) return ~raw_hardware(~crc, static_cast<const uint8_t*>(data), n);
#endif
  return crc32c_extend_portable(crc, data, n);
}

}  // namespace zerodp::ckpt
