// pipectl: the one command-line entry point for people. `pipectl --help` lists the verbs;
// `pipectl VERB --help` explains each one's options.
#include <cstdio>
#include <cstring>
#include <string>

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
    {"jobs", "list jobs", pipecoord::cli::RunJobs},
    {"status", "show one job", pipecoord::cli::RunStatus},
    {"watch", "follow a job, a live line per step", pipecoord::cli::RunWatch},
    {"cancel", "cancel a job", pipecoord::cli::RunCancel},
    {"workers", "list registered workers", pipecoord::cli::RunWorkers},
    {"trace", "write a job's measured run as a Perfetto trace", pipecoord::cli::RunTrace},
    {"events", "list a job's events: lifecycle and health checks", pipecoord::cli::RunEvents},
};

void PrintHelp(FILE* out) {
  std::fprintf(out,
               "usage: pipectl VERB [options]   (pipectl VERB --help for a verb's options)\n\n"
               "pipecoord's command line: pipeline schedules, memory budgets, jobs.\n\nverbs:\n");
  for (const Verb& v : kVerbs) std::fprintf(out, "  %-12s %s\n", v.name, v.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    PrintHelp(stdout);
    return argc < 2 ? pipecoord::cli::kExitUsage : pipecoord::cli::kExitOk;
  }
  for (const Verb& v : kVerbs) {
    if (std::strcmp(argv[1], v.name) == 0) return v.run(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "pipectl: unknown verb \"%s\"\n\n", argv[1]);
  PrintHelp(stderr);
  return pipecoord::cli::kExitUsage;
}
