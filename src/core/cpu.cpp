#include "core/cpu.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace zerodp {

namespace {

// XGETBV(0): which register states the OS saves on context switches.
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
    char vendor[13] = {};
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    f.intel = std::strcmp(vendor, "GenuineIntel") == 0;
  }
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1u, avx = (ecx >> 28) & 1u;
  const uint64_t xcr = osxsave ? xcr0() : 0;
  const bool ymm_saved = (xcr & 0x6u) == 0x6u;
  const bool zmm_saved = (xcr & 0xE6u) == 0xE6u;      // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  const bool tiles_saved = (xcr & 0x60000u) == 0x60000u;  // XTILECFG, XTILEDATA
  f.f16c = avx && ymm_saved && ((ecx >> 29) & 1u);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx512f = zmm_saved && ((ebx >> 16) & 1u);
  constexpr unsigned kV4Bits = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);  // F DQ CD BW VL
  f.x86_64_v4 = zmm_saved && (ebx & kV4Bits) == kV4Bits;
  f.avx512_fp16 = f.avx512f && ((edx >> 23) & 1u);
  f.amx_bf16 = tiles_saved && ((edx >> 22) & 1u);
  f.amx_tile = tiles_saved && ((edx >> 24) & 1u);
  const unsigned max_sub = eax;
  if (max_sub >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    f.avx512_bf16 = f.avx512f && ((eax >> 5) & 1u);
    f.amx_fp16 = tiles_saved && ((eax >> 21) & 1u);
  }
  return f;
}

// ZERODP_MAX_CPU_ISA's level: "x86-64-v3", or "" for the CPU as it is.
std::string read_isa_limit() {
  const char* env = std::getenv("ZERODP_MAX_CPU_ISA");
  const std::string v = env ? env : "";
  if (v.empty() || v == "native") return "";
  if (v == "x86-64-v3" || v == "avx2") return "x86-64-v3";
  throw UsageError(fmt::format("ZERODP_MAX_CPU_ISA='{:.40}' is not one of x86-64-v3, avx2, native", v));
}

}  // namespace

std::string cpu_isa_limit() {
  static const std::string limit = read_isa_limit();
  return limit;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f = detect();
    if (cpu_isa_limit() == "x86-64-v3") {  // an AVX2 CPU: x86-64-v3 has F16C, nothing of AVX-512 or AMX
      const CpuFeatures v3{.intel = f.intel, .f16c = f.f16c};
      f = v3;
    }
    return f;
  }();
  return features;
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.amx_tile, "amx_tile");
  add(f.amx_bf16, "amx_bf16");
  add(f.amx_fp16, "amx_fp16");
  add(f.avx512f, "avx512f");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_fp16, "avx512_fp16");
  add(f.f16c, "f16c");
  return s.empty() ? "none" : s;
}

std::string cpu_model_name() {
  unsigned regs[12] = {};
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000004u) return "unknown";
  for (unsigned i = 0; i < 3; ++i)
    __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
  char brand[49] = {};
  std::memcpy(brand, regs, 48);
  std::string s(brand);
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "unknown" : s.substr(b, e - b + 1);
}

}  // namespace zerodp
