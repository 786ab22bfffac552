#include "common/perfetto_trace.h"

#include "common/json_writer.h"

namespace pipecoord {
namespace {

struct OpStyle {
  std::string_view op;
  const char* category;
  const char* colour;
};

constexpr OpStyle kStyles[] = {
    {"F", "compute", "thread_state_running"},
    {"B", "compute", "rail_response"},
    {"W", "compute", "rail_animation"},
    {"BW", "compute", "rail_load"},
    {"SEND_F", "comm", "generic_work"},
    {"RECV_F", "comm", "generic_work"},
    {"SEND_B", "comm", "generic_work"},
    {"RECV_B", "comm", "generic_work"},
    {"PROBE", "probe", "yellow"},
    {"OPT", "optimizer", "olive"},
    {kTraceIdle, "idle", "grey"},
};
constexpr OpStyle kOther = {"", "other", "black"};

const OpStyle& StyleOf(std::string_view op) {
  for (const OpStyle& s : kStyles) {
    if (s.op == op) return s;
  }
  return kOther;
}

void WriteArgs(JsonWriter* w, const std::vector<TraceArg>& args) {
  w->BeginObject();
  for (const TraceArg& a : args) w->Key(a.key).Raw(a.json);
  w->EndObject();
}

}  // namespace

const char* TraceColour(std::string_view op) { return StyleOf(op).colour; }
const char* TraceCategory(std::string_view op) { return StyleOf(op).category; }

TraceArg::TraceArg(std::string_view k, std::string_view text) : key(k), json(JsonString(text)) {}
TraceArg::TraceArg(std::string_view k, int64_t value) : key(k), json(JsonInt(value)) {}
TraceArg TraceArg::Number(std::string_view k, double value) {
  TraceArg a(k, int64_t{0});
  a.json = JsonNumber(value);
  return a;
}

void PerfettoTrace::SetOtherData(std::vector<TraceArg> members) { other_data_ = std::move(members); }

void PerfettoTrace::Meta(std::string_view what, int pid, int tid, const TraceArg& arg) {
  JsonWriter w;
  w.BeginObject().Key("ph").String("M").Key("pid").Int(pid).Key("tid").Int(tid).Key("name").String(what).Key("args");
  WriteArgs(&w, {arg});
  w.EndObject();
  events_.push_back(w.Take());
}

void PerfettoTrace::ProcessName(int pid, std::string_view name) {
  Meta("process_name", pid, 0, TraceArg("name", name));
}

void PerfettoTrace::ThreadName(int pid, int tid, std::string_view name) {
  Meta("thread_name", pid, tid, TraceArg("name", name));
}

void PerfettoTrace::ThreadSortIndex(int pid, int tid, int index) {
  Meta("thread_sort_index", pid, tid, TraceArg("sort_index", int64_t{index}));
}

void PerfettoTrace::Action(const TraceAction& a) {
  const OpStyle& style = StyleOf(a.op);
  const bool comm = std::string_view(style.category) == "comm";
  std::string name = std::string(a.op) + " mb" + std::to_string(a.mb) + " s" + std::to_string(a.stage);
  if (comm) name += (a.op.substr(0, 4) == "SEND" ? " -> " : " <- ") + std::to_string(a.peer);
  std::vector<TraceArg> args = {TraceArg("op", a.op), TraceArg("stage", int64_t{a.stage}),
                                TraceArg("mb", int64_t{a.mb})};
  if (comm) args.emplace_back("peer", int64_t{a.peer});
  args.insert(args.end(), a.extra_args.begin(), a.extra_args.end());

  JsonWriter w;
  w.BeginObject().Key("name").String(name).Key("cat").String(style.category);
  if (a.instant) {
    w.Key("ph").String("i").Key("s").String("t").Key("ts").Number(a.ts_us);
  } else {
    w.Key("ph").String("X").Key("ts").Number(a.ts_us).Key("dur").Number(a.dur_us);
  }
  w.Key("pid").Int(a.pid).Key("tid").Int(a.tid).Key("cname").String(style.colour).Key("args");
  WriteArgs(&w, args);
  w.EndObject();
  events_.push_back(w.Take());
}

void PerfettoTrace::Idle(std::string_view name, int pid, int tid, double ts_us, double dur_us,
                         std::vector<TraceArg> args) {
  const OpStyle& style = StyleOf(kTraceIdle);
  JsonWriter w;
  w.BeginObject().Key("name").String(name).Key("cat").String(style.category).Key("ph").String("X");
  w.Key("ts").Number(ts_us).Key("dur").Number(dur_us).Key("pid").Int(pid).Key("tid").Int(tid);
  w.Key("cname").String(style.colour).Key("args");
  WriteArgs(&w, args);
  w.EndObject();
  events_.push_back(w.Take());
}

std::string PerfettoTrace::Text() const {
  JsonWriter w;
  w.BeginObject().Key("displayTimeUnit").String("ms");
  if (!other_data_.empty()) {
    w.Break("\n ").Key("otherData");
    WriteArgs(&w, other_data_);
  }
  w.Break("\n ").Key("traceEvents").BeginArray();
  for (const std::string& e : events_) w.Break("\n  ").Raw(e);
  w.Break("\n ").EndArray().EndObject();
  return w.Take() + "\n";
}

}  // namespace pipecoord
