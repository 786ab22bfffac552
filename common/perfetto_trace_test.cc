#include "common/perfetto_trace.h"

#include <limits>

#include <gtest/gtest.h>

namespace pipecoord {
namespace {

TEST(PerfettoTraceTest, OneColourAndCategoryPerOp) {
  const struct {
    const char* op;
    const char* colour;
    const char* category;
  } kWant[] = {
      {"F", "thread_state_running", "compute"}, {"B", "rail_response", "compute"},
      {"W", "rail_animation", "compute"},       {"BW", "rail_load", "compute"},
      {"SEND_F", "generic_work", "comm"},       {"RECV_F", "generic_work", "comm"},
      {"SEND_B", "generic_work", "comm"},       {"RECV_B", "generic_work", "comm"},
      {"PROBE", "yellow", "probe"},             {"OPT", "olive", "optimizer"},
      {"idle", "grey", "idle"},                 {"OP_UNSPECIFIED", "black", "other"},
      {"", "black", "other"},
  };
  for (const auto& w : kWant) {
    EXPECT_STREQ(TraceColour(w.op), w.colour) << w.op;
    EXPECT_STREQ(TraceCategory(w.op), w.category) << w.op;
  }
}

TEST(PerfettoTraceTest, EmptyTrace) {
  EXPECT_EQ(PerfettoTrace().Text(), "{\"displayTimeUnit\": \"ms\",\n \"traceEvents\": [\n ]}\n");
}

TEST(PerfettoTraceTest, ExactText) {
  PerfettoTrace t;
  t.SetOtherData({TraceArg("schedule", "1f1b"), TraceArg("pp", int64_t{2}), TraceArg::Number("bubble_rate", 0.25),
                  TraceArg::Number("nan", std::numeric_limits<double>::quiet_NaN())});
  t.ProcessName(0, "pipecoord \"1f1b\"");
  t.ThreadName(0, 1, "rank 1");
  t.ThreadSortIndex(0, 1, 1);
  TraceAction f;
  f.op = "F";
  f.stage = 2;
  f.mb = 3;
  f.tid = 1;
  f.ts_us = 1000;
  f.dur_us = 1500.5;
  t.Action(f);
  TraceAction send = f;
  send.op = "SEND_F";
  send.peer = 0;
  send.ts_us = 2500.5;
  send.instant = true;
  t.Action(send);
  TraceAction recv = f;
  recv.op = "RECV_B";
  recv.peer = 2;
  recv.ts_us = 3000;
  recv.dur_us = 250;
  recv.extra_args = {TraceArg("step", int64_t{7})};
  t.Action(recv);
  TraceAction opt;
  opt.op = "OPT";
  opt.stage = 2;
  opt.mb = -1;
  opt.peer = 5;  // not written: OPT has no peer
  opt.pid = 1;
  opt.ts_us = 0.125;
  opt.dur_us = 1e-3;
  t.Action(opt);
  t.Idle("bubble", 0, 1, 4000, 2000);
  t.Idle("predicted idle", 1, 0, 1e20, 0.1, {TraceArg("step", int64_t{3})});
  EXPECT_EQ(t.Text(),
            "{\"displayTimeUnit\": \"ms\",\n"
            " \"otherData\": {\"schedule\": \"1f1b\", \"pp\": 2, \"bubble_rate\": 0.25, \"nan\": null},\n"
            " \"traceEvents\": [\n"
            "  {\"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"name\": \"process_name\", \"args\": {\"name\": "
            "\"pipecoord \\\"1f1b\\\"\"}},\n"
            "  {\"ph\": \"M\", \"pid\": 0, \"tid\": 1, \"name\": \"thread_name\", \"args\": {\"name\": \"rank 1\"}},\n"
            "  {\"ph\": \"M\", \"pid\": 0, \"tid\": 1, \"name\": \"thread_sort_index\", \"args\": {\"sort_index\": 1}},\n"
            "  {\"name\": \"F mb3 s2\", \"cat\": \"compute\", \"ph\": \"X\", \"ts\": 1000, \"dur\": 1500.5, \"pid\": 0, "
            "\"tid\": 1, \"cname\": \"thread_state_running\", \"args\": {\"op\": \"F\", \"stage\": 2, \"mb\": 3}},\n"
            "  {\"name\": \"SEND_F mb3 s2 -> 0\", \"cat\": \"comm\", \"ph\": \"i\", \"s\": \"t\", \"ts\": 2500.5, "
            "\"pid\": 0, \"tid\": 1, \"cname\": \"generic_work\", \"args\": {\"op\": \"SEND_F\", \"stage\": 2, "
            "\"mb\": 3, \"peer\": 0}},\n"
            "  {\"name\": \"RECV_B mb3 s2 <- 2\", \"cat\": \"comm\", \"ph\": \"X\", \"ts\": 3000, \"dur\": 250, "
            "\"pid\": 0, \"tid\": 1, \"cname\": \"generic_work\", \"args\": {\"op\": \"RECV_B\", \"stage\": 2, "
            "\"mb\": 3, \"peer\": 2, \"step\": 7}},\n"
            "  {\"name\": \"OPT mb-1 s2\", \"cat\": \"optimizer\", \"ph\": \"X\", \"ts\": 0.125, \"dur\": 0.001, "
            "\"pid\": 1, \"tid\": 0, \"cname\": \"olive\", \"args\": {\"op\": \"OPT\", \"stage\": 2, \"mb\": -1}},\n"
            "  {\"name\": \"bubble\", \"cat\": \"idle\", \"ph\": \"X\", \"ts\": 4000, \"dur\": 2000, \"pid\": 0, "
            "\"tid\": 1, \"cname\": \"grey\", \"args\": {}},\n"
            "  {\"name\": \"predicted idle\", \"cat\": \"idle\", \"ph\": \"X\", \"ts\": 1e+20, \"dur\": 0.1, "
            "\"pid\": 1, \"tid\": 0, \"cname\": \"grey\", \"args\": {\"step\": 3}}\n"
            " ]}\n");
}

}  // namespace
}  // namespace pipecoord
