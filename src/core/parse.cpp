#include "core/parse.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/strings.h"

namespace zerodp {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<double> try_parse_double(std::string_view text) {
  std::string_view s = trim(text);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

std::optional<int64_t> try_parse_int(std::string_view text) {
  const std::string_view s = trim(text);
  std::string_view digits = s;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), x);
  if (!digits.empty() && ec == std::errc() && end == digits.data() + digits.size()) return x;
  const std::optional<double> d = try_parse_double(s);
  if (d && std::floor(*d) == *d && std::abs(*d) < 9.2e18) return static_cast<int64_t>(*d);
  return std::nullopt;
}

std::optional<bool> try_parse_bool(std::string_view text) {
  const std::string v = to_lower(trim(text));
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  return std::nullopt;
}

int64_t parse_int(std::string_view text, std::string_view what) {
  const std::optional<int64_t> x = try_parse_int(text);
  ZDP_REQUIRE(x.has_value(), "{}: expected an integer, got '{}'", what, text);
  return *x;
}

int parse_int32(std::string_view text, std::string_view what) {
  const int64_t x = parse_int(text, what);
  ZDP_REQUIRE(x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max(),
              "{}: {} is out of range", what, x);
  return static_cast<int>(x);
}

uint64_t parse_uint(std::string_view text, std::string_view what) {
  const std::string_view t = trim(text);
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  ZDP_REQUIRE(!t.empty() && ec == std::errc() && end == t.data() + t.size(),
              "{}: expected a non-negative integer, got '{}'", what, text);
  return x;
}

double parse_number(std::string_view text, std::string_view what) {
  const std::optional<double> x = try_parse_double(text);
  ZDP_REQUIRE(x.has_value(), "{}: expected a number, got '{}'", what, text);
  return *x;
}

bool parse_bool(std::string_view text, std::string_view what) {
  const std::optional<bool> x = try_parse_bool(text);
  ZDP_REQUIRE(x.has_value(), "{}: expected true or false, got '{}'", what, text);
  return *x;
}

uint64_t parse_bytes(std::string_view text, std::string_view what) {
  const std::string_view t = trim(text);
  size_t split = t.size();
  while (split > 0 && std::isalpha(static_cast<unsigned char>(t[split - 1]))) --split;
  const std::optional<double> number = try_parse_double(t.substr(0, split));
  const std::string unit = to_lower(t.substr(split));
  struct Unit {
    const char* name;
    long double bytes;
  };
  static const Unit units[] = {
      {"", 1},          {"b", 1},
      {"kb", 1e3L},     {"mb", 1e6L},      {"gb", 1e9L},      {"tb", 1e12L},
      {"kib", 0x1p10L}, {"mib", 0x1p20L},  {"gib", 0x1p30L},  {"tib", 0x1p40L},
      {"k", 0x1p10L},   {"m", 0x1p20L},    {"g", 0x1p30L},    {"t", 0x1p40L},
  };
  const Unit* u = nullptr;
  for (const Unit& candidate : units)
    if (unit == candidate.name) u = &candidate;
  ZDP_REQUIRE(number.has_value() && u != nullptr,
              "{}: expected a byte count like 8GB, 512MiB, 4G or 1000000, got '{}'", what, text);
  const long double bytes = std::floor(static_cast<long double>(*number) * u->bytes);
  ZDP_REQUIRE(bytes >= 1 && bytes < 0x1p64L, "{}: {} is not a byte count between 1 and 2^64", what, text);
  return static_cast<uint64_t>(bytes);
}

}  // namespace zerodp
