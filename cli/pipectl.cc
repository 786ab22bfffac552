// pipectl: the one command-line entry point for people. `pipectl --help` lists the verbs;
// `pipectl VERB --help` explains each one's options.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/verbs.h"

namespace {

struct Verb {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

constexpr Verb kVerbs[] = {
    {"schedule", "compute, validate and simulate a pipeline schedule; export it",
     pipecoord::cli::RunSchedule},
    {"schedules", "list the schedules pipectl knows", pipecoord::cli::RunSchedules},
    {"memory", "per-rank memory of a training configuration (analytic and op-level)",
     pipecoord::cli::RunMemory},
    {"plan", "search parallel strategies that fit in memory, fastest first", pipecoord::cli::RunPlan},
    {"submit", "submit a job (JobSpec JSON) to the coordinator", pipecoord::cli::RunSubmit},
    {"resubmit", "submit a job's spec again as a new job", pipecoord::cli::RunResubmit},
    {"jobs", "list jobs", pipecoord::cli::RunJobs},
    {"status", "show one job", pipecoord::cli::RunStatus},
    {"watch", "follow a job, a live line per step", pipecoord::cli::RunWatch},
    {"cancel", "cancel a job", pipecoord::cli::RunCancel},
    {"workers", "list registered workers", pipecoord::cli::RunWorkers},
    {"trace", "write a job's measured run as a Perfetto trace", pipecoord::cli::RunTrace},
    {"events", "list a job's events: lifecycle and health checks", pipecoord::cli::RunEvents},
    {"rebalance", "propose layers per rank from a job's measured stage costs", pipecoord::cli::RunRebalance},
    {"export", "write a job's trained model as a Hugging Face Llama folder", pipecoord::cli::RunExport},
    {"data", "training data: text to a byte-level token dataset; check a dataset", pipecoord::cli::RunData},
};

// Options a verb may also take before its name (`pipectl --coordinator ADDR jobs`): the
// connection every job verb shares and the output format. Each takes a value.
constexpr const char* kGlobalFlags[] = {"coordinator", "tls-ca", "token", "format"};

void PrintHelp(FILE* out) {
  std::fprintf(out,
               "usage: pipectl [--coordinator HOST:PORT] [--tls-ca FILE] [--token TOKEN] [--format FORMAT] VERB "
               "[options]\n       (pipectl VERB --help for a verb's options)\n\n"
               "pipecoord's command line: pipeline schedules, memory budgets, jobs.\n\nverbs:\n");
  for (const Verb& v : kVerbs) std::fprintf(out, "  %-12s %s\n", v.name, v.summary);
  std::fprintf(out,
               "\n--coordinator, --tls-ca, --token and --format may come before the verb or after it, as "
               "the verb takes them (after it wins).\n");
}

bool IsGlobalFlag(const std::string& name) {
  for (const char* g : kGlobalFlags) {
    if (name == g) return true;
  }
  return false;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "pipectl: %s\n\n", message.c_str());
  PrintHelp(stderr);
  return pipecoord::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // Options before the verb move behind it, ahead of the verb's own: the verb parses them as it
  // parses its own, so a value after the verb wins and a verb without the option says so.
  std::vector<char*> leading;
  int i = 1;
  for (; i < argc && std::strncmp(argv[i], "--", 2) == 0; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") break;
    const std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    if (!IsGlobalFlag(name)) {
      return Usage("unknown option \"" + arg + "\" before the verb (there: --coordinator, --tls-ca, --token, --format)");
    }
    leading.push_back(argv[i]);
    if (arg.find('=') == std::string::npos) {
      if (i + 1 >= argc) return Usage(arg + ": needs a value");
      leading.push_back(argv[++i]);
    }
  }
  if (i >= argc && !leading.empty()) return Usage("no verb after the options");
  if (i >= argc || std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0 ||
      std::strcmp(argv[i], "help") == 0) {
    PrintHelp(stdout);
    return i >= argc ? pipecoord::cli::kExitUsage : pipecoord::cli::kExitOk;
  }
  for (const Verb& v : kVerbs) {
    if (std::strcmp(argv[i], v.name) != 0) continue;
    std::vector<char*> args = leading;
    args.insert(args.end(), argv + i + 1, argv + argc);
    return v.run(static_cast<int>(args.size()), args.data());
  }
  return Usage("unknown verb \"" + std::string(argv[i]) + "\"");
}
