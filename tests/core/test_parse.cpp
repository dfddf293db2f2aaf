// core/parse.h: what numbers, switches and byte counts the flags and keys accept, and that every
// refusal names what was being read.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/parse.h"
#include "error_message.h"

using namespace zerodp;

namespace {

template <typename Fn>
std::string usage_error(Fn&& fn) {
  return zerodp::testing::error_message<UsageError>(fn);
}

TEST(Parse, Integers) {
  EXPECT_EQ(parse_int(" 12 ", "--n"), 12);
  EXPECT_EQ(parse_int("+7", "--n"), 7);
  EXPECT_EQ(parse_int("-3", "--n"), -3);
  EXPECT_EQ(parse_int("5e8", "--n"), 500'000'000);  // DeepSpeed configs write bucket sizes so
  EXPECT_FALSE(try_parse_int("1.5").has_value());
  EXPECT_FALSE(try_parse_int("").has_value());
  EXPECT_FALSE(try_parse_int("1e30").has_value());
  EXPECT_NE(usage_error([] { parse_int("x", "--steps"); }).find("--steps: expected an integer, got 'x'"),
            std::string::npos);
  EXPECT_NE(usage_error([] { parse_int32("3000000000", "--hysteresis"); }).find("--hysteresis"), std::string::npos);
  EXPECT_EQ(parse_uint("18446744073709551615", "--seed"), UINT64_MAX);
  for (const char* bad : {"-1", "+1", "1e3", ""})
    EXPECT_NE(usage_error([&] { parse_uint(bad, "--seed"); }).find("--seed"), std::string::npos) << bad;
}

TEST(Parse, NumbersAndSwitches) {
  EXPECT_EQ(parse_number("1e-3", "--lr"), 1e-3);
  for (const char* bad : {"nan", "inf", "1x", ""})
    EXPECT_NE(usage_error([&] { parse_number(bad, "--lr"); }).find("--lr"), std::string::npos) << bad;
  for (const char* yes : {"true", "1", "YES", " on "}) EXPECT_TRUE(parse_bool(yes, "--x")) << yes;
  for (const char* no : {"false", "0", "No", "off"}) EXPECT_FALSE(parse_bool(no, "--x")) << no;
  EXPECT_NE(usage_error([] { parse_bool("maybe", "--overlap-comm"); }).find("--overlap-comm"), std::string::npos);
}

TEST(Parse, ByteCounts) {
  EXPECT_EQ(parse_bytes("8GB", "--memory-budget"), 8'000'000'000u);
  EXPECT_EQ(parse_bytes("512MiB", "--memory-budget"), 512ull << 20);
  EXPECT_EQ(parse_bytes("4G", "--memory-budget"), 4ull << 30);
  EXPECT_EQ(parse_bytes("4g", "--memory-budget"), 4ull << 30);
  EXPECT_EQ(parse_bytes(" 2 KiB ", "--memory-budget"), 2048u);
  EXPECT_EQ(parse_bytes("1.5KiB", "--memory-budget"), 1536u);
  EXPECT_EQ(parse_bytes("1e9", "--memory-budget"), 1'000'000'000u);
  EXPECT_EQ(parse_bytes("123456789", "--memory-budget"), 123'456'789u);
  EXPECT_EQ(parse_bytes("100B", "--memory-budget"), 100u);
  for (const char* bad : {"", "abc", "-1", "0", "8XB", "1e30TB", "GB", "0.1"})
    EXPECT_NE(usage_error([&] { parse_bytes(bad, "--gpu-memory"); }).find("--gpu-memory"), std::string::npos) << bad;
}

}  // namespace
