#include "memory/formula.h"

#include <gtest/gtest.h>

namespace pipecoord::memory {
namespace {

const ShapeVars kVars{2048, 4, 6144, 24576, 64, 8, 51200};

TEST(FormulaTest, Evaluates) {
  EXPECT_EQ(*EvalFormula("s", kVars), 2048);
  EXPECT_EQ(*EvalFormula("2*f", kVars), 49152);
  EXPECT_EQ(*EvalFormula("g*h/a", kVars), 768);
  EXPECT_EQ(*EvalFormula("h+2*g*h/a", kVars), 6144 + 1536);
  EXPECT_EQ(*EvalFormula("(s - 48) / 2", kVars), 1000);
  EXPECT_EQ(*EvalFormula(" v ", kVars), 51200);
  EXPECT_EQ(*EvalFormula("1", kVars), 1);
}

TEST(FormulaTest, ErrorsAreNamed) {
  EXPECT_EQ(EvalFormula("h/q", kVars).status().message(),
            "shape formula \"h/q\": unknown variable 'q' (known: s b h f a g v d)");
  EXPECT_EQ(EvalFormula("h/7", kVars).status().message(),
            "shape formula \"h/7\": division leaves a remainder (6144 / 7)");
  EXPECT_EQ(EvalFormula("s/(a-64)", kVars).status().message(), "shape formula \"s/(a-64)\": division by zero");
  EXPECT_EQ(EvalFormula("(s", kVars).status().message(), "shape formula \"(s\": missing ')'");
  EXPECT_EQ(EvalFormula("s*", kVars).status().message(), "shape formula \"s*\": unexpected end");
  EXPECT_EQ(EvalFormula("s s", kVars).status().message(), "shape formula \"s s\": unexpected 's'");
  EXPECT_FALSE(EvalFormula("99999999999*99999999999", kVars).ok());
  EXPECT_FALSE(EvalFormula("", kVars).ok());
}

}  // namespace
}  // namespace pipecoord::memory
