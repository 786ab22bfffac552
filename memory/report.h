// A MemoryReport for people (a text table) and for programs (JSON).
//
// JSON (all sizes in bytes, counts plain):
//   {"model": {"name", "layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "seq_len",
//              "tied_embeddings", "norm", "mlp", "attention", "linear_bias", "dropout",
//              "learned_positions"},
//    "training": {"micro_batch", "microbatches", "dtype", "optimizer", "zero", "dp", "tp", "sp",
//                 "pp", "vpp", "schedule", "recompute", "recipe", "fp32_grads"},
//    "total_params", "split_backward", "stage_to_rank": [...], "stage_layers": [...],
//    "block": {"saved_bytes", "stored_bytes", "w_bytes", "recompute_bytes",
//              "groups": {"attention": bytes, ...},
//              "tensors": [{"name", "group", "shape": [...], "dtype", "bytes", "kept",
//                           "weight_input", "selective", "why"}], "kept": [...], "w_grads": [...]},
//    "first_stage": {"stored_bytes", "w_bytes", "tensors": [...]},
//    "last_stage": {"stored_bytes", "w_bytes", "transient_bytes", "tensors": [...],
//                   "transient": [...]},
//    "ranks": [{"rank", "stages", "layers", "first_stage", "last_stage", "params",
//               "params_bytes", "grads_bytes", "master_bytes", "grad_copy_bytes",
//               "optimizer_state_bytes", "optimizer_bytes" (master + grad copy + states), "activations_bytes",
//               "live_microbatches", "transient_bytes", "peak_bytes"}]}
#ifndef PIPECOORD_MEMORY_REPORT_H_
#define PIPECOORD_MEMORY_REPORT_H_

#include <string>

#include "memory/estimate.h"

namespace pipecoord::memory {

std::string MemoryReportText(const MemoryReport& report);
// `extra_members`, when given, is appended to the top-level object as is (e.g.
// "\"liveness\": {...}").
std::string MemoryReportJson(const MemoryReport& report, const std::string& extra_members = "");  // ends in a newline

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_REPORT_H_
