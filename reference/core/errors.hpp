// Typed errors. Library code throws; only main() turns them into exit codes
// (ConfigError/InputError/IoError -> 2). Messages name the problem, the reason
// and, where one exists, a hint.
#pragma once

#include <stdexcept>
#include <string>

namespace qsa {

enum class ErrorKind { kConfig, kInput, kIo, kInternal };

class QsaError : public std::runtime_error {
 public:
  QsaError(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// An impossible or unsupported configuration.
class ConfigError : public QsaError {
 public:
  explicit ConfigError(const std::string& what) : QsaError(ErrorKind::kConfig, what) {}
};

// Bad step metadata, tensors of the wrong shape, out-of-range indices, a
// cache read that the trace cannot justify.
class InputError : public QsaError {
 public:
  explicit InputError(const std::string& what) : QsaError(ErrorKind::kInput, what) {}
};

class IoError : public QsaError {
 public:
  explicit IoError(const std::string& what) : QsaError(ErrorKind::kIo, what) {}
};

// A broken internal contract: a bug in qsa, never the user's input.
class InternalError : public QsaError {
 public:
  explicit InternalError(const std::string& what) : QsaError(ErrorKind::kInternal, what) {}
};

}  // namespace qsa

// Debug-only check of internal contracts; user input is validated with typed
// errors instead.
#ifdef NDEBUG
#define QSA_ASSERT(cond) ((void)0)
#else
#define QSA_ASSERT(cond)                                                              \
  ((cond) ? (void)0                                                                   \
          : throw ::qsa::InternalError(std::string("internal check failed: " #cond " at ") + \
                                       __FILE__ + ":" + std::to_string(__LINE__)))
#endif
