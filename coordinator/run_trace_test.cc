#include "coordinator/run_trace.h"

#include <gtest/gtest.h>

namespace pipecoord::coordinator {
namespace {

v1::ActionTiming Timing(v1::Op op, int stage, int mb, int peer, int64_t start_ns, int64_t end_ns) {
  v1::ActionTiming t;
  t.mutable_action()->set_op(op);
  t.mutable_action()->set_stage(stage);
  t.mutable_action()->set_microbatch(mb);
  t.mutable_action()->set_peer(peer);
  t.set_step(0);
  t.set_start_ns(start_ns);
  t.set_end_ns(end_ns);
  return t;
}

v1::Job TwoRankJob() {
  v1::Job job;
  job.set_id("job-1");
  job.mutable_spec()->set_schedule("1f1b");
  job.mutable_spec()->set_pp(2);
  job.mutable_spec()->set_dp(1);
  job.mutable_plan()->set_predicted_makespan(4);
  v1::IdleWindow* w = job.mutable_plan()->add_predicted_idle();
  w->set_rank(1);
  w->set_start(0);
  w->set_end(1);
  return job;
}

constexpr char kHeader[] =
    "{\"displayTimeUnit\": \"ms\",\n"
    " \"otherData\": {\"job\": \"job-1\", \"schedule\": \"1f1b\", \"pp\": 2, \"dp\": 1, \"time_unit\": "
    "\"measured: us from the first action shown\"},\n"
    " \"traceEvents\": [\n"
    "  {\"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"name\": \"process_name\", \"args\": {\"name\": \"job-1 measured\"}},\n"
    "  {\"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"name\": \"process_name\", \"args\": {\"name\": "
    "\"job-1 predicted idle (scaled to each step)\"}},\n"
    "  {\"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"name\": \"thread_name\", \"args\": {\"name\": \"rank 0 (dp 0)\"}},\n"
    "  {\"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"name\": \"thread_sort_index\", \"args\": {\"sort_index\": 0}},\n"
    "  {\"ph\": \"M\", \"pid\": 0, \"tid\": 1, \"name\": \"thread_name\", \"args\": {\"name\": \"rank 1 (dp 0)\"}},\n"
    "  {\"ph\": \"M\", \"pid\": 0, \"tid\": 1, \"name\": \"thread_sort_index\", \"args\": {\"sort_index\": 1}},\n"
    "  {\"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"name\": \"thread_name\", \"args\": {\"name\": "
    "\"rank 0 predicted idle\"}},\n"
    "  {\"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"name\": \"thread_sort_index\", \"args\": {\"sort_index\": 0}},\n"
    "  {\"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"name\": \"thread_name\", \"args\": {\"name\": "
    "\"rank 1 predicted idle\"}},\n"
    "  {\"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"name\": \"thread_sort_index\", \"args\": {\"sort_index\": 1}}";

TEST(RunTraceTest, NoActionsIsTheTracksOnly) {
  EXPECT_EQ(MeasuredRunTrace(TwoRankJob(), {}, {}), std::string(kHeader) + "\n ]}\n");
}

// Measured actions in the shared writer's names and colours (the same as a schedule's trace),
// SEND/RECV as complete events with their peer, and the predicted idle window scaled to the
// measured step: makespan 4 units over 8 us, so 2 us per unit.
TEST(RunTraceTest, ExactText) {
  const std::vector<v1::ActionTiming> actions = {
      Timing(v1::F, 0, 0, -1, 1000, 3000),      Timing(v1::SEND_F, 0, 0, 1, 3000, 3500),
      Timing(v1::PROBE, 0, 0, -1, 5000, 6000),  Timing(v1::F, 1, 0, -1, 4000, 9000),
      Timing(v1::OPT, 1, -1, -1, 9000, 9000),
  };
  EXPECT_EQ(MeasuredRunTrace(TwoRankJob(), actions, {0, 0, 0, 1, 1}),
            std::string(kHeader) +
                ",\n"
                "  {\"name\": \"F mb0 s0\", \"cat\": \"compute\", \"ph\": \"X\", \"ts\": 0, \"dur\": 2, \"pid\": 0, "
                "\"tid\": 0, \"cname\": \"thread_state_running\", \"args\": {\"op\": \"F\", \"stage\": 0, \"mb\": 0, "
                "\"step\": 0}},\n"
                "  {\"name\": \"SEND_F mb0 s0 -> 1\", \"cat\": \"comm\", \"ph\": \"X\", \"ts\": 2, \"dur\": 0.5, "
                "\"pid\": 0, \"tid\": 0, \"cname\": \"generic_work\", \"args\": {\"op\": \"SEND_F\", \"stage\": 0, "
                "\"mb\": 0, \"peer\": 1, \"step\": 0}},\n"
                "  {\"name\": \"PROBE mb0 s0\", \"cat\": \"probe\", \"ph\": \"X\", \"ts\": 4, \"dur\": 1, \"pid\": 0, "
                "\"tid\": 0, \"cname\": \"yellow\", \"args\": {\"op\": \"PROBE\", \"stage\": 0, \"mb\": 0, "
                "\"step\": 0}},\n"
                "  {\"name\": \"F mb0 s1\", \"cat\": \"compute\", \"ph\": \"X\", \"ts\": 3, \"dur\": 5, \"pid\": 0, "
                "\"tid\": 1, \"cname\": \"thread_state_running\", \"args\": {\"op\": \"F\", \"stage\": 1, \"mb\": 0, "
                "\"step\": 0}},\n"
                "  {\"name\": \"OPT mb-1 s1\", \"cat\": \"optimizer\", \"ph\": \"X\", \"ts\": 8, \"dur\": 0, "
                "\"pid\": 0, \"tid\": 1, \"cname\": \"olive\", \"args\": {\"op\": \"OPT\", \"stage\": 1, \"mb\": -1, "
                "\"step\": 0}},\n"
                "  {\"name\": \"predicted idle\", \"cat\": \"idle\", \"ph\": \"X\", \"ts\": 0, \"dur\": 2, \"pid\": 1, "
                "\"tid\": 1, \"cname\": \"grey\", \"args\": {\"step\": 0}}\n"
                " ]}\n");
}

// A REDUCE_GRAD overlaps the rank's next actions, so it is drawn on the rank's all-reduce track
// (tid world + rank), named only when the run has one.
TEST(RunTraceTest, ReduceGradOnATrackOfItsOwn) {
  const std::vector<v1::ActionTiming> actions = {
      Timing(v1::W, 1, 0, -1, 1000, 2000),
      Timing(v1::REDUCE_GRAD, 1, -1, -1, 2000, 6000),
      Timing(v1::BW, 0, 0, -1, 2000, 4000),
  };
  const std::string text = MeasuredRunTrace(TwoRankJob(), actions, {1, 1, 1});
  EXPECT_NE(text.find("  {\"ph\": \"M\", \"pid\": 0, \"tid\": 3, \"name\": \"thread_name\", \"args\": {\"name\": "
                      "\"rank 1 (dp 0) gradient all-reduce\"}},\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{\"name\": \"REDUCE_GRAD mb-1 s1\", \"cat\": \"other\", \"ph\": \"X\", \"ts\": 1, \"dur\": 4, "
                      "\"pid\": 0, \"tid\": 3,"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{\"name\": \"BW mb0 s0\", \"cat\": \"compute\", \"ph\": \"X\", \"ts\": 1, \"dur\": 2, "
                      "\"pid\": 0, \"tid\": 1,"),
            std::string::npos)
      << text;
  EXPECT_EQ(MeasuredRunTrace(TwoRankJob(), {actions[0], actions[2]}, {1, 1}).find("gradient all-reduce"),
            std::string::npos);
}

}  // namespace
}  // namespace pipecoord::coordinator
