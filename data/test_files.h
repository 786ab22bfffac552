// Files for the tests of data/: a fresh folder under the test's temporary directory, writing
// and reading bytes, and where the Python-written inputs are (tests run from the runfiles root).
#ifndef PIPECOORD_DATA_TEST_FILES_H_
#define PIPECOORD_DATA_TEST_FILES_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace pipecoord::data::testing {

// The genrule :python_written's outputs.
inline const std::string kPythonWritten = "data/python_written/";
// What megatron-core's IndexedDatasetBuilder wrote (data/testdata/write_megatron_core.py).
inline const std::string kMegatronCoreWritten = "data/megatron_core_written/";
// What the official safetensors package wrote (data/testdata/write_safetensors_official.py).
inline const std::string kOfficialWritten = "data/official_written/";

// An empty folder named `name` under $TEST_TMPDIR (removed first if a previous case left it).
inline std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp ? tmp : "/tmp") / ("data_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void CopyFile(const std::string& from, const std::string& to) { WriteBytes(to, ReadBytes(from)); }

// stdout of a shell command, and its exit status.
inline std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

}  // namespace pipecoord::data::testing

#endif  // PIPECOORD_DATA_TEST_FILES_H_
