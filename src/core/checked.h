// Checked integer arithmetic for sizes computed from outside input (file headers, manifests,
// model dimensions): a product or sum that would wrap is reported instead of silently becoming a
// small number that then passes a comparison (or sizes an allocation).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>

namespace zerodp {

// a·b and a + b, or nullopt when the result does not fit T.
template <typename T>
std::optional<T> checked_mul(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out;
  return __builtin_mul_overflow(a, b, &out) ? std::nullopt : std::optional<T>(out);
}
template <typename T>
std::optional<T> checked_add(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T out;
  return __builtin_add_overflow(a, b, &out) ? std::nullopt : std::optional<T>(out);
}

// The product of all factors, or nullopt when any partial product does not fit T.
template <typename T>
std::optional<T> checked_product(std::initializer_list<T> factors) {
  T out = 1;
  for (T f : factors) {
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  }
  return out;
}

// A running int64 size: once any step overflows it stays invalid, so a long formula is written
// plainly and tested once at the end ("CheckedSize n = a; n *= b; n += c; if (!n.ok()) ...").
class CheckedSize {
 public:
  constexpr CheckedSize(int64_t v = 0) : v_(v), ok_(true) {}  // NOLINT: implicit from a plain size

  CheckedSize& operator+=(CheckedSize o) {
    ok_ = ok_ && o.ok_ && !__builtin_add_overflow(v_, o.v_, &v_);
    return *this;
  }
  CheckedSize& operator*=(CheckedSize o) {
    ok_ = ok_ && o.ok_ && !__builtin_mul_overflow(v_, o.v_, &v_);
    return *this;
  }
  friend CheckedSize operator+(CheckedSize a, CheckedSize b) { return a += b; }
  friend CheckedSize operator*(CheckedSize a, CheckedSize b) { return a *= b; }

  bool ok() const { return ok_; }
  // The value; only meaningful when ok().
  int64_t value() const { return v_; }
  // ok() and value() <= limit.
  bool within(int64_t limit) const { return ok_ && v_ <= limit; }

 private:
  int64_t v_;
  bool ok_;
};

}  // namespace zerodp
