// Which sanitizers this translation unit is compiled with, for the few places that must behave
// differently under them. GCC says so with __SANITIZE_ADDRESS__, Clang through __has_feature (Clang 14
// defines no __SANITIZE_ADDRESS__); the sanitized CI build is Clang's, the others GCC's.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define ZERODP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZERODP_ASAN 1
#endif
#endif

// LeakSanitizer runs inside ASan, or alone (-fsanitize=leak, which only Clang announces).
#if defined(ZERODP_ASAN)
#define ZERODP_LSAN 1
#elif defined(__has_feature)
#if __has_feature(leak_sanitizer)
#define ZERODP_LSAN 1
#endif
#endif
