// The wire API keeps the JSON field names that scripts and the Python client rely on.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace pipecoord::v1 {
namespace {

TEST(ApiTest, JobSpecJsonRoundTrip) {
  const std::string json = R"({
    "name": "demo", "schedule": "zbh1", "pp": 4, "microbatches": 8, "steps": 3,
    "stageLayers": [2, 1, 1, 2],
    "model": {"layers": 6, "hidden": 64, "heads": 4, "vocab": 128, "seqLen": 16, "seed": "7"}
  })";
  JobSpec spec;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &spec).ok());
  EXPECT_EQ(spec.schedule(), "zbh1");
  EXPECT_EQ(spec.pp(), 4);
  EXPECT_EQ(spec.stage_layers_size(), 4);
  EXPECT_EQ(spec.stage_layers(3), 2);
  EXPECT_EQ(spec.model().seq_len(), 16);
  EXPECT_EQ(spec.model().seed(), 7u);

  std::string bytes = spec.SerializeAsString();
  JobSpec back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.SerializeAsString(), bytes);
}

TEST(ApiTest, UnknownJsonFieldIsRejectedByName) {
  JobSpec spec;
  auto status = google::protobuf::util::JsonStringToMessage(R"({"pipeline": 4})", &spec);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("pipeline"), std::string::npos);
}

TEST(ApiTest, AssignmentCarriesTheRankJobList) {
  Assignment a;
  a.set_rank(2);
  auto* action = a.mutable_jobs()->add_actions();
  action->set_op(SEND_F);
  action->set_stage(2);
  action->set_microbatch(5);
  action->set_peer(3);
  Assignment back;
  ASSERT_TRUE(back.ParseFromString(a.SerializeAsString()));
  ASSERT_EQ(back.jobs().actions_size(), 1);
  EXPECT_EQ(back.jobs().actions(0).op(), SEND_F);
  EXPECT_EQ(back.jobs().actions(0).peer(), 3);
  EXPECT_EQ(Op_Name(back.jobs().actions(0).op()), "SEND_F");
}

}  // namespace
}  // namespace pipecoord::v1
