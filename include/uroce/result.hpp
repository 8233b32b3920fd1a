// Errors as values: a positive errno code plus a message that says what was wrong.
#pragma once
#include <string>
#include <utility>
#include <variant>

namespace uroce {

struct Error {
  int code = 0;          // positive errno value (EINVAL, ENOMEM, ...)
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)) {}
  bool ok() const { return err_.code == 0; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return err_; }

 private:
  Error err_;
};

using Status = Result<void>;

inline Error make_error(int code, std::string msg) { return Error{code, std::move(msg)}; }

}  // namespace uroce
