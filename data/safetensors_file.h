// Safetensors files on disk: SafetensorsFile maps one read-only and hands out views of its
// tensors (no copy of the data buffer: a rank that needs a few layers touches only their pages);
// WriteSafetensorsFile streams tensors to a new file. The format and its rules:
// safetensors_format.h.
#ifndef PIPECOORD_DATA_SAFETENSORS_FILE_H_
#define PIPECOORD_DATA_SAFETENSORS_FILE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "data/mapped_file.h"
#include "data/safetensors_format.h"

namespace pipecoord::data {

// One tensor inside a mapped file: valid while the file object lives.
struct TensorView {
  const SafetensorsTensor* info = nullptr;
  std::span<const uint8_t> bytes;  // the elements, little-endian, row-major

  // The elements widened to float, exactly (F32, BF16 and F16 only; every value of the
  // narrower types is a float). `out` must hold info->elements() floats. Errors name the
  // tensor: "tensor \"w\" is I32, not F32, BF16 or F16".
  Status CopyToFloat(std::span<float> out) const;
};

class SafetensorsFile {
 public:
  // Errors: the file cannot be opened or mapped, or breaks a rule of the format (naming it).
  static Result<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // The whole mapped file; the views point into it.
  std::span<const uint8_t> bytes() const { return file_.bytes(); }
  const SafetensorsLayout& layout() const { return layout_; }
  // NOT_FOUND "PATH has no tensor \"w\"" when absent.
  Result<TensorView> Tensor(std::string_view name) const;

 private:
  SafetensorsFile(MappedFile file, SafetensorsLayout layout) : file_(std::move(file)), layout_(std::move(layout)) {}

  MappedFile file_;
  SafetensorsLayout layout_;
};

// Writes the tensors and metadata to `path` (PlanSafetensors' layout), through a temporary
// file renamed into place, so a reader never sees half a file. Errors name the path or the
// tensor.
Status WriteSafetensorsFile(const std::string& path, std::span<const TensorToWrite> tensors,
                            std::span<const std::pair<std::string, std::string>> metadata = {});

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_SAFETENSORS_FILE_H_
