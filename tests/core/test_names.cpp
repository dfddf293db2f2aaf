// core/names.h: the first spelling names a value, every spelling parses, case as asked.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/names.h"

using namespace zerodp;

namespace {

enum class Colour { kRed, kGreen, kBlue };
constexpr Spelling<Colour> kColours[] = {{Colour::kRed, "red"}, {Colour::kGreen, "Green"}, {Colour::kRed, "r"}};

TEST(Names, FirstSpellingNamesEveryOneParses) {
  EXPECT_STREQ(name_of(kColours, Colour::kRed), "red");
  EXPECT_STREQ(name_of(kColours, Colour::kGreen), "Green");
  EXPECT_STREQ(name_of(kColours, Colour::kBlue), "?");  // no spelling
  EXPECT_EQ(find_spelling(kColours, "r", false), Colour::kRed);
  EXPECT_EQ(find_spelling(kColours, "green", true), Colour::kGreen);
  EXPECT_FALSE(find_spelling(kColours, "green", false).has_value());
  EXPECT_FALSE(find_spelling(kColours, "blue", true).has_value());
}

TEST(Names, DTypesRoundTripThroughTheirNames) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    EXPECT_EQ(parse_dtype(dtype_safetensors_name(t)), t);
  }
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  EXPECT_THROW(parse_dtype("Fp32"), UsageError);  // dtype names are case-sensitive
}

}  // namespace
