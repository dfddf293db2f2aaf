// CRC-32C (Castagnoli): the checksum of every file of a checkpoint. Polynomial 0x1EDC6F41
// (reflected 0x82F63B78), initial value and final xor 0xFFFFFFFF, as in iSCSI, ext4 and LevelDB;
// crc32c("123456789") = 0xE3069283. On x86-64 CPUs with SSE 4.2 the crc32 instruction computes it
// (chosen at run time); elsewhere a table-driven loop, 8 bytes at a time, gives the same values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zerodp::ckpt {

// The CRC of the bytes that gave `crc`, followed by data[0, n): extending streams, so that
// crc32c_extend(crc32c(a), b) == crc32c(a followed by b). crc32c_extend(0, ...) starts a new one.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

// The table-driven implementation alone (for tests that compare it with the instruction).
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n);
// Whether crc32c_extend uses the CPU's crc32 instruction.
bool crc32c_hardware();

}  // namespace zerodp::ckpt
