// MappedFile: a whole file mapped read-only into memory, so datasets and weights are read in
// place (the kernel pages them in on first touch and can drop them under pressure) instead of
// being copied into the heap.
//
// The mapping is private and read-only. A file truncated by someone else while it is mapped
// makes a read past its new end fault (SIGBUS): readers that go on reading during a job read
// through ReadMapped, which turns that fault into an error instead of the end of the process.
#ifndef PIPECOORD_DATA_MAPPED_FILE_H_
#define PIPECOORD_DATA_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "common/status.h"
#include "data/mapped_read.h"  // ReadMapped, for readers of the bytes

namespace pipecoord::data {

class MappedFile {
 public:
  // Errors (INVALID_ARGUMENT, naming the path): "cannot open PATH: No such file or directory",
  // "PATH: not a regular file", "cannot map PATH: REASON". An empty file maps to no bytes.
  static Result<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Valid while this object lives; moving the object keeps the address.
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}
  void Unmap();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_MAPPED_FILE_H_
