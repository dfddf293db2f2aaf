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

// Polynomial arithmetic modulo the CRC's polynomial, in the reflected order the register uses
// (bit 31 holds x^0): what joins the CRCs of pieces computed apart.
constexpr uint32_t times_x(uint32_t a) { return (a & 1u) ? (a >> 1) ^ kPoly : a >> 1; }
constexpr uint32_t multiply_mod_poly(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {  // a's terms x^0, x^1, ...; b times x^i alongside
    if (a & bit) product ^= b;
    b = times_x(b);
  }
  return product;
}
// x^(2^k) mod P.
constexpr uint32_t x_to_two_to(int k) {
  uint32_t p = 1u << 30;  // x
  for (int i = 0; i < k; ++i) p = multiply_mod_poly(p, p);
  return p;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZERODP_CRC32C_X86 1
// SSE 4.2's crc32 instruction is exactly this CRC (Castagnoli, reflected), 8 bytes per step.
__attribute__((target("sse4.2"))) uint32_t raw_hardware_serial(uint32_t c, const uint8_t* p, size_t n) {
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

// One crc32 instruction waits three cycles for the one before it but a new one can start every cycle:
// three independent streams over three neighbouring stripes run about three times as fast (a
// checkpoint's rank file is checksummed at its save and again at its resume). The register of a
// stripe s that followed a register r is r·x^(8·|s|) ⊕ crc(0, s) (the CRC is linear), which joins them.
constexpr size_t kStripe = 4096;
constexpr uint32_t kShiftStripe = x_to_two_to(15);  // x^(8 · 4096) = x^(2^15)
static_assert(size_t{8} * kStripe == size_t{1} << 15);

__attribute__((target("sse4.2"))) uint32_t raw_hardware(uint32_t c, const uint8_t* p, size_t n) {
  while (n >= 3 * kStripe) {
    uint64_t c0 = c, c1 = 0, c2 = 0;
    for (size_t at = 0; at < kStripe; at += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + at, 8);
      std::memcpy(&w1, p + kStripe + at, 8);
      std::memcpy(&w2, p + 2 * kStripe + at, 8);
      c0 = __builtin_ia32_crc32di(c0, w0);
      c1 = __builtin_ia32_crc32di(c1, w1);
      c2 = __builtin_ia32_crc32di(c2, w2);
    }
    c = multiply_mod_poly(static_cast<uint32_t>(c0), kShiftStripe) ^ static_cast<uint32_t>(c1);
    c = multiply_mod_poly(c, kShiftStripe) ^ static_cast<uint32_t>(c2);
    p += 3 * kStripe;
    n -= 3 * kStripe;
  }
  return raw_hardware_serial(c, p, n);
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
