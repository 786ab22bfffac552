// Status and Result<T>: errors are values with a message a user can act on.
//
// A library returns Status (or Result<T> when it also produces a value). A service maps the
// Code to its transport (gRPC status codes, a CLI exit code) and shows message() as is, so a
// message names the field, the rule it broke and the values involved.
#ifndef PIPECOORD_COMMON_STATUS_H_
#define PIPECOORD_COMMON_STATUS_H_

#include <string>
#include <utility>
#include <variant>

namespace pipecoord {

enum class Code {
  kOk = 0,
  kInvalidArgument,     // the caller's input breaks a rule
  kNotFound,            // a named thing does not exist
  kFailedPrecondition,  // valid input, wrong state
  kInternal,            // a bug or a broken invariant of ours
  kUnavailable,         // a resource (device, peer) cannot be reached
  kUnimplemented,       // not built yet: said plainly rather than faked
  kPermissionDenied,    // the caller may not do this (wrong rank, job or credentials)
  kResourceExhausted,   // a bound was reached (queue, store, message size)
  kUnauthenticated,     // the caller's credentials are missing or wrong (token, client certificate)
};

const char* CodeName(Code code);

class Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: pp: must be >= 1, got 0"
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string message) {
  return Status(Code::kInvalidArgument, std::move(message));
}
inline Status NotFound(std::string message) { return Status(Code::kNotFound, std::move(message)); }
inline Status FailedPrecondition(std::string message) {
  return Status(Code::kFailedPrecondition, std::move(message));
}
inline Status Internal(std::string message) { return Status(Code::kInternal, std::move(message)); }
inline Status PermissionDenied(std::string message) {
  return Status(Code::kPermissionDenied, std::move(message));
}
inline Status Unauthenticated(std::string message) {
  return Status(Code::kUnauthenticated, std::move(message));
}
inline Status ResourceExhausted(std::string message) {
  return Status(Code::kResourceExhausted, std::move(message));
}
inline Status Unimplemented(std::string message) {
  return Status(Code::kUnimplemented, std::move(message));
}
inline Status Unavailable(std::string message) {
  return Status(Code::kUnavailable, std::move(message));
}

// Either a value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}    // NOLINT: must not be OK

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace pipecoord

// Returns early from the enclosing function when expr is a non-OK Status.
#define PIPECOORD_RETURN_IF_ERROR(expr)      \
  do {                                       \
    ::pipecoord::Status _st = (expr);        \
    if (!_st.ok()) return _st;               \
  } while (0)

#endif  // PIPECOORD_COMMON_STATUS_H_
