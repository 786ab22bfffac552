// The unknown-field message against JobSpec's own descriptor and the parser's own messages
// (protobuf's JsonStringToMessage on misspelt specs), not strings typed here.
#include "cli/spec_field_hint.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "proto/job.pb.h"

namespace pipecoord::cli {
namespace {

std::string ParserSays(const std::string& json) {
  v1::JobSpec spec;
  auto st = google::protobuf::util::JsonStringToMessage(json, &spec);
  EXPECT_FALSE(st.ok()) << json;
  return std::string(st.message());
}

TEST(SpecFieldHintTest, EditDistanceIsLevenshteinIgnoringCase) {
  EXPECT_EQ(EditDistance("hiden", "hidden"), 1);
  EXPECT_EQ(EditDistance("microbatchs", "microbatches"), 1);
  EXPECT_EQ(EditDistance("PP", "pp"), 0);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(SpecFieldHintTest, NamesTheObjectAndTheClosestFieldsAtEveryDepth) {
  const auto* d = v1::JobSpec::descriptor();
  auto top = UnknownFieldMessage(*d, "spec", ParserSays(R"({"microbatchs": 4})"));
  ASSERT_TRUE(top.has_value());
  EXPECT_EQ(top->rfind("spec: unknown field \"microbatchs\": did you mean \"microbatches\" or \"microBatchSize\"? "
                         "(JobSpec's fields: name, model, ", 0), 0u)
      << *top;
  auto nested = UnknownFieldMessage(*d, "spec", ParserSays(R"({"model": {"hiden": 32}})"));
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(nested->rfind("spec.model: unknown field \"hiden\": did you mean \"hidden\"? (ModelSpec's fields: ", 0), 0u)
      << *nested;
  // Nothing close: no guess, the whole list.
  auto far = UnknownFieldMessage(*d, "spec", ParserSays(R"({"optimizer": {"zzzzzzzz": 1}})"));
  ASSERT_TRUE(far.has_value());
  EXPECT_EQ(far->rfind("spec.optimizer: unknown field \"zzzzzzzz\" (OptimizerSpec's fields: ", 0), 0u) << *far;
  EXPECT_NE(far->find("clipGradNorm"), std::string::npos) << *far;
}

TEST(SpecFieldHintTest, OtherParserErrorsAreLeftAsTheyAre) {
  EXPECT_FALSE(UnknownFieldMessage(*v1::JobSpec::descriptor(), "spec", ParserSays(R"({"pp": "two"})")).has_value());
  EXPECT_FALSE(UnknownFieldMessage(*v1::JobSpec::descriptor(), "spec", "").has_value());
}

}  // namespace
}  // namespace pipecoord::cli
