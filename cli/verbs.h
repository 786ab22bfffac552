// The verbs of pipectl. Each lives in its own <verb>_cmd.cc and is listed in pipectl.cc.
// A verb returns the process exit code: 0 done, 1 failed at run time, 2 bad usage or input.
#ifndef PIPECOORD_CLI_VERBS_H_
#define PIPECOORD_CLI_VERBS_H_

namespace pipecoord::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// argv holds the verb's own arguments (after the verb name).
int RunSchedule(int argc, char** argv);
int RunSchedules(int argc, char** argv);
// Memory budgets and strategy search (memory_cmd.cc, plan_cmd.cc).
int RunMemory(int argc, char** argv);
int RunPlan(int argc, char** argv);
// Job verbs (job_verbs.cc), clients of the coordinator.
int RunSubmit(int argc, char** argv);
int RunResubmit(int argc, char** argv);
int RunJobs(int argc, char** argv);
int RunStatus(int argc, char** argv);
int RunWatch(int argc, char** argv);
int RunCancel(int argc, char** argv);
int RunWorkers(int argc, char** argv);
int RunTrace(int argc, char** argv);
// A job's lifecycle and health events (events_cmd.cc).
int RunEvents(int argc, char** argv);
// A layer placement from a job's measured stage costs (rebalance_cmd.cc).
int RunRebalance(int argc, char** argv);
// A job's trained model as a Hugging Face Llama folder (export_cmd.cc).
int RunExport(int argc, char** argv);
// Training data on disk: prepare, check (data_cmd.cc).
int RunData(int argc, char** argv);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_VERBS_H_
