// pipectl schedules: the schedules pipectl knows, from the registry.
#include <cstdio>
#include <string>

#include "cli/cli_io.h"
#include "cli/verbs.h"
#include "common/flags.h"
#include "common/json_writer.h"
#include "schedules/registry.h"

namespace pipecoord::cli {
namespace {

namespace s = ::pipecoord::schedules;

std::string Vpp(const s::ScheduleInfo& info) {
  if (std::string(info.name) == "csv") return "file";
  std::string v = std::to_string(info.default_vpp);
  return info.required_vpp != 0 ? v + " (fixed)" : v;
}

std::string Text() {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-12s %-10s %-6s %s\n", "NAME", "VPP", "SPLIT", "SUMMARY");
  out += line;
  for (const s::ScheduleInfo& info : s::AllSchedules()) {
    std::snprintf(line, sizeof(line), "%-12s %-10s %-6s %s\n", info.name, Vpp(info).c_str(),
                  info.split_backward ? "yes" : "no", info.summary);
    out += line;
  }
  out += "\nVPP: model chunks per rank when --vpp is not given (fixed: the only one allowed).\n"
         "SPLIT: yes if the backward is split into B (input gradient) and W (weight gradient).\n"
         "Not schedules but choices: best (--schedule best, or a JobSpec's \"schedule\": \"best\") builds every\n"
         "schedule above that accepts the shape, zb-auto and v-auto included, and keeps the shortest within the\n"
         "memory limit; a JobSpec's \"schedule\": \"auto\" leaves the whole strategy to the coordinator.\n";
  return out;
}

std::string Json() {
  JsonWriter w;
  w.BeginArray();
  for (const s::ScheduleInfo& info : s::AllSchedules()) {
    w.Break("\n  ").BeginObject().Key("name").String(info.name).Key("default_vpp").Int(info.default_vpp);
    w.Key("required_vpp").Int(info.required_vpp).Key("split_backward").Bool(info.split_backward);
    w.Key("summary").String(info.summary).EndObject();
  }
  w.Break("\n").EndArray();
  return w.Take() + "\n";
}

}  // namespace

int RunSchedules(int argc, char** argv) {
  std::string format = "text";
  FlagSet flags("pipectl schedules [--format text|json]",
                "Lists the schedules pipectl knows: name, chunks per rank by default, whether the "
                "backward is split into B and W, and a summary.");
  flags.Format(&format, {"text", "json"}, "output: text (a table) or json (an array of objects with name, "
                                  "default_vpp, required_vpp (0: any), split_backward, summary); "
                                  "default text");
  if (int rc = ParseFlagsOrExit(flags, argc, argv, "schedules"); rc >= 0) return rc;
  return EmitOutput("schedules", format == "json" ? Json() : Text(), "", format);
}

}  // namespace pipecoord::cli
