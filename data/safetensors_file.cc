#include "data/safetensors_file.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/json_writer.h"
#include "data/little_endian.h"

namespace pipecoord::data {
namespace {

float Bits32ToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE binary16 to binary32, exactly (subnormals, infinities and NaN included).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return Bits32ToFloat(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return Bits32ToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal or zero
  return sign ? -magnitude : magnitude;
}

}  // namespace

Status TensorView::CopyToFloat(std::span<float> out) const {
  const uint64_t n = info->elements();
  if (out.size() != n) {
    return InvalidArgument("tensor " + JsonString(info->name) + " has " + std::to_string(n) + " elements, the output " +
                           std::to_string(out.size()));
  }
  const uint8_t* p = bytes.data();
  switch (info->dtype) {
    case SafetensorsDtype::kF32:
      for (uint64_t i = 0; i < n; ++i) out[i] = Bits32ToFloat(LoadU32(p + 4 * i));
      return Status::Ok();
    case SafetensorsDtype::kBF16:
      for (uint64_t i = 0; i < n; ++i) out[i] = Bits32ToFloat(static_cast<uint32_t>(LoadU16(p + 2 * i)) << 16);
      return Status::Ok();
    case SafetensorsDtype::kF16:
      for (uint64_t i = 0; i < n; ++i) out[i] = HalfToFloat(LoadU16(p + 2 * i));
      return Status::Ok();
    default:
      return InvalidArgument("tensor " + JsonString(info->name) + " is " + DtypeName(info->dtype) +
                             ", not F32, BF16 or F16");
  }
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  auto layout = ParseSafetensors(file->bytes(), path);
  if (!layout.ok()) return layout.status();
  return SafetensorsFile(std::move(file).value(), std::move(layout).value());
}

Result<TensorView> SafetensorsFile::Tensor(std::string_view name) const {
  const SafetensorsTensor* t = layout_.Find(name);
  if (t == nullptr) return NotFound(path() + " has no tensor " + JsonString(name));
  return TensorView{t, file_.bytes().subspan(layout_.data_start + t->begin, t->bytes())};
}

Status WriteSafetensorsFile(const std::string& path, std::span<const TensorToWrite> tensors,
                            std::span<const std::pair<std::string, std::string>> metadata) {
  auto plan = PlanSafetensors(tensors, metadata);
  if (!plan.ok()) return InvalidArgument(path + ": " + plan.status().message());
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  int error = 0;
  auto put = [&](const void* data, size_t size) {
    if (error == 0 && size > 0 && std::fwrite(data, 1, size, f) != size) error = errno ? errno : EIO;
  };
  put(plan->head.data(), plan->head.size());
  for (size_t i : plan->order) put(tensors[i].bytes.data(), tensors[i].bytes.size());
  if (std::fclose(f) != 0 && error == 0) error = errno ? errno : EIO;
  if (error != 0) {
    std::remove(tmp.c_str());
    return Unavailable("cannot write " + tmp + ": " + std::strerror(error));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return Unavailable("cannot rename " + tmp + " to " + path + ": " + std::strerror(e));
  }
  return Status::Ok();
}

}  // namespace pipecoord::data
