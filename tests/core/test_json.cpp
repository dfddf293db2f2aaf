#include "core/json.h"

#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace zerodp {
namespace {

std::string nested(size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

std::string message_of(std::string_view text, const JsonLimits& limits = {}) {
  try {
    parse_json(text, "'t.json'", limits);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Json, DepthIsBoundedBeforeTheValueIsBuilt) {
  JsonLimits limits;
  limits.max_depth = 4;
  EXPECT_NO_THROW(parse_json(nested(4), "'t.json'", limits));
  EXPECT_NE(message_of(nested(5), limits).find("nested deeper than 4 levels"), std::string::npos);
  EXPECT_NO_THROW(parse_json(R"({"a":{"b":{"c":[1]}}})", "'t.json'", limits));
  EXPECT_THROW(parse_json(R"({"a":{"b":{"c":[[1]]}}})", "'t.json'", limits), UsageError);
  // 100,000 levels (the crash of the issue): refused at once, with a short message naming the source.
  const std::string msg = message_of(nested(100000));
  EXPECT_NE(msg.find("'t.json'"), std::string::npos);
  EXPECT_LT(msg.size(), 100u);
}

TEST(Json, SizeSyntaxAndDuplicates) {
  JsonLimits limits;
  limits.max_bytes = 10;
  EXPECT_NE(message_of(R"({"abc": 12345})", limits).find("over the 10 allowed"), std::string::npos);
  const std::string bad = message_of(R"({"a": 1,, })");
  EXPECT_NE(bad.find("syntax error at byte"), std::string::npos) << bad;
  EXPECT_EQ(parse_json(R"({"a": 1, "a": 2})", "x")["a"], 2);  // nlohmann keeps the last by default
  limits = {};
  limits.refuse_duplicate_keys = true;
  EXPECT_NE(message_of(R"({"b": {"a": 1, "a": 2}})", limits).find("key a appears twice"), std::string::npos);
  EXPECT_NO_THROW(parse_json(R"({"a": {"a": 1}, "b": {"a": 2}})", "x", limits));
}

TEST(Json, DescribeIsShortAndFlat) {
  using nlohmann::json;
  EXPECT_EQ(describe_json(json(3)), "3");
  EXPECT_EQ(describe_json(json(-2.5)), "-2.5");
  EXPECT_EQ(describe_json(json(true)), "true");
  EXPECT_EQ(describe_json(json(nullptr)), "null");
  EXPECT_EQ(describe_json(json("abc")), "\"abc\"");
  EXPECT_EQ(describe_json(json::array({1, 2, 3})), "[1, 2, 3]");
  EXPECT_EQ(describe_json(json::array({0.5, "x"})), "[0.5, \"x\"]");
  EXPECT_EQ(describe_json(json::object({{"a", 1}})), "{\"a\": 1}");
  EXPECT_EQ(describe_json(json::array({1, json::array({2})})), "an array of 2 elements");  // not flat
  EXPECT_EQ(describe_json(json(std::vector<int>(9, 1))), "an array of 9 elements");      // not short
  EXPECT_EQ(describe_json(json::array({std::string(100, 'y')})), "an array of 1 element");
  EXPECT_EQ(describe_json(json::object({{"a", json::object()}})), "an object with 1 key");
  const std::string s = describe_json(json(std::string(5000, 'x')));
  EXPECT_LT(s.size(), 80u);
  EXPECT_NE(s.find("(5000 bytes)"), std::string::npos);
  // A deeply nested value is described without walking it.
  json deep = json::array();
  for (int i = 0; i < 1000; ++i) deep = json::array({deep});
  EXPECT_EQ(describe_json(deep), "an array of 1 element");
}

TEST(Json, DescribeTextEscapesAndCutsOnCharacterBoundaries) {
  EXPECT_EQ(describe_text("a\nb"), "a\\x0ab");
  const std::string e = "\xC3\xA9";  // é, two bytes
  std::string s;
  for (int i = 0; i < 40; ++i) s += e;
  const std::string d = describe_text(s, 5);
  EXPECT_EQ(d.substr(0, 4), e + e) << d;
  EXPECT_NE(d.find("... (80 bytes)"), std::string::npos);
}

}  // namespace
}  // namespace zerodp
