#include "memory/liveness.h"

#include <algorithm>
#include <unordered_map>

namespace pipecoord::memory {
namespace {

struct TensorInfo {
  std::vector<int64_t> shape;
  std::string dtype;
  bool persistable = false;
  int storage = -1;
};

struct Storage {
  int64_t bytes = 0;
  int alloc_at = -1;  // op index; -1: before the first op
  int last_use = -1;
  bool persistable = false;
  bool kept = false;
};

std::string Where(int p, int o, const char* list, size_t k) {
  return "programs[" + std::to_string(p) + "].ops[" + std::to_string(o) + "]." + list + "[" +
         std::to_string(k) + "]";
}

Result<int64_t> Bytes(const std::vector<int64_t>& shape, const std::string& dtype, const std::string& where) {
  int64_t bytes = DtypeBytes(dtype);
  if (bytes == 0) return InvalidArgument(where + ".dtype: unknown dtype \"" + dtype + "\"");
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(where + ".shape: dimensions must be >= 0");
    if (__builtin_mul_overflow(bytes, d, &bytes) || bytes > (int64_t{1} << 56)) {
      return InvalidArgument(where + ".shape: tensor larger than 2^56 bytes");
    }
  }
  return bytes;
}

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// A later reference must agree with the declaration when it restates shape or dtype.
Status Agree(const TensorRef& ref, const TensorInfo& info, const std::string& where) {
  if (ref.shape_given && ref.shape != info.shape) {
    return InvalidArgument(where + ".shape: tensor \"" + ref.id + "\" was declared " + ShapeText(info.shape) +
                           ", here " + ShapeText(ref.shape));
  }
  if (!ref.dtype.empty() && ref.dtype != info.dtype) {
    return InvalidArgument(where + ".dtype: tensor \"" + ref.id + "\" was declared " + info.dtype +
                           ", here " + ref.dtype);
  }
  if (ref.persistable && !info.persistable) {
    return InvalidArgument(where + ".persistable: tensor \"" + ref.id + "\" was declared not persistable");
  }
  return Status::Ok();
}

}  // namespace

Result<LivenessResult> SimulateLiveness(const ProgramSet& set) {
  std::unordered_map<std::string, TensorInfo> tensors;
  std::vector<Storage> storages;
  LivenessResult res;
  int index = 0;
  for (size_t p = 0; p < set.programs.size(); ++p) {
    const Program& prog = set.programs[p];
    for (size_t o = 0; o < prog.ops.size(); ++o, ++index) {
      const ProgramOp& op = prog.ops[o];
      OpLiveness ol;
      ol.program = static_cast<int>(p);
      ol.op = static_cast<int>(o);
      ol.name = prog.name + "/" + op.name;
      res.ops.push_back(std::move(ol));
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const TensorRef& in = op.inputs[k];
        const std::string where = Where(static_cast<int>(p), static_cast<int>(o), "inputs", k);
        auto it = tensors.find(in.id);
        if (it == tensors.end()) {  // an input of the whole set
          if (!in.shape_given) {
            return InvalidArgument(where + ": tensor \"" + in.id + "\" first appears here without a shape");
          }
          TensorInfo info;
          info.shape = in.shape;
          info.dtype = in.dtype.empty() ? "bf16" : in.dtype;
          info.persistable = in.persistable;
          auto bytes = Bytes(info.shape, info.dtype, where);
          if (!bytes.ok()) return bytes.status();
          Storage st;
          st.bytes = *bytes;
          st.persistable = in.persistable;
          info.storage = static_cast<int>(storages.size());
          storages.push_back(st);
          it = tensors.emplace(in.id, std::move(info)).first;
        } else {
          PIPECOORD_RETURN_IF_ERROR(Agree(in, it->second, where));
        }
        storages[it->second.storage].last_use = index;
      }
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        const TensorRef& out = op.outputs[k];
        const std::string where = Where(static_cast<int>(p), static_cast<int>(o), "outputs", k);
        std::string source;
        if (out.inplace) {
          source = !out.inplace_of.empty() ? out.inplace_of : (op.inputs.empty() ? "" : op.inputs[0].id);
          bool is_input = false;
          for (const TensorRef& in : op.inputs) is_input = is_input || in.id == source;
          if (!is_input) {
            return InvalidArgument(where + ".inplace_of: \"" + source + "\" is not an input of this op");
          }
        }
        auto it = tensors.find(out.id);
        if (it != tensors.end()) {
          if (out.inplace && out.id == source) {  // writes its own input: same tensor
            PIPECOORD_RETURN_IF_ERROR(Agree(out, it->second, where));
            continue;
          }
          if (it->second.persistable) {  // an op updating a persistable buffer
            PIPECOORD_RETURN_IF_ERROR(Agree(out, it->second, where));
            storages[it->second.storage].last_use = index;
            continue;
          }
          return InvalidArgument(where + ": tensor \"" + out.id + "\" is produced twice (or read before the op that produces it)");
        }
        TensorInfo info;
        info.dtype = out.dtype.empty() ? "bf16" : out.dtype;
        info.persistable = out.persistable;
        if (out.inplace) {
          const TensorInfo& src = tensors.at(source);
          info.shape = out.shape_given ? out.shape : src.shape;
          if (out.dtype.empty()) info.dtype = src.dtype;
          info.storage = src.storage;
          info.persistable = src.persistable;
          storages[info.storage].last_use = index;
        } else {
          if (!out.shape_given) {
            return InvalidArgument(where + ": tensor \"" + out.id + "\" first appears here without a shape");
          }
          info.shape = out.shape;
          auto bytes = Bytes(info.shape, info.dtype, where);
          if (!bytes.ok()) return bytes.status();
          Storage st;
          st.bytes = *bytes;
          st.persistable = out.persistable;
          st.alloc_at = out.persistable ? -1 : index;
          st.last_use = index;
          info.storage = static_cast<int>(storages.size());
          storages.push_back(st);
        }
        tensors.emplace(out.id, std::move(info));
      }
    }
  }
  for (size_t i = 0; i < set.keep.size(); ++i) {
    auto it = tensors.find(set.keep[i]);
    if (it == tensors.end()) {
      return InvalidArgument("keep[" + std::to_string(i) + "]: no tensor \"" + set.keep[i] + "\" in the programs");
    }
    storages[it->second.storage].kept = true;
  }

  // Replay: per op, what it allocates and what dies after it.
  const int n = index;
  std::vector<int64_t> alloc(n, 0), freed(n, 0);
  int64_t live = 0, total = 0;
  for (const Storage& st : storages) {  // every partial sum below stays under the total
    if (__builtin_add_overflow(total, st.bytes, &total) || total > (int64_t{1} << 62)) {
      return InvalidArgument("programs: tensors add up to more than 2^62 bytes");
    }
  }
  for (const Storage& st : storages) {
    if (st.persistable) {
      res.persistable_bytes += st.bytes;
      continue;
    }
    if (st.alloc_at < 0) res.input_bytes += st.bytes;
    else alloc[st.alloc_at] += st.bytes;
    if (!st.kept && st.last_use >= 0) freed[st.last_use] += st.bytes;
  }
  live = res.persistable_bytes + res.input_bytes;
  res.peak_bytes = live;
  for (int i = 0; i < n; ++i) {
    OpLiveness& ol = res.ops[i];
    ol.before = live;
    ol.during = live + alloc[i];
    ol.after = ol.during - freed[i];
    live = ol.after;
    if (res.peak_op < 0 || ol.during > res.peak_bytes) {  // the first op's during >= the start
      res.peak_bytes = ol.during;
      res.peak_op = i;
    }
  }
  res.program_end.assign(set.programs.size(), 0);
  int64_t carry = res.persistable_bytes + res.input_bytes;
  size_t op_i = 0;
  for (size_t p = 0; p < set.programs.size(); ++p) {
    op_i += set.programs[p].ops.size();
    if (op_i > 0) carry = res.ops[op_i - 1].after;
    res.program_end[p] = carry;
  }
  return res;
}

}  // namespace pipecoord::memory
