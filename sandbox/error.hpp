#pragma once
// Errors are values across sandgate: every fallible library call returns
// sandbox::Expected<T>, never throws and never exits. Exceptions are reserved for start-up
// configuration (command-line parsing).

#include <expected>
#include <string>
#include <string_view>

namespace sandbox {

enum class ErrorKind {
    invalid_input,  // the caller's request is wrong; retrying it will not help
    timeout,        // a deadline passed
    unavailable,    // a needed facility is missing on this machine (bwrap, userns, a runtime)
    transient,      // may succeed if tried again (network, 5xx, lock contention)
    permanent,      // failed for good (I/O error, a remote said no)
};

struct Error {
    ErrorKind kind = ErrorKind::permanent;
    std::string message;
};

template <typename T>
using Expected = std::expected<T, Error>;

// Builds the error side of an Expected: `return fail(ErrorKind::invalid_input, "...")`.
inline std::unexpected<Error> fail(ErrorKind kind, std::string message) {
    return std::unexpected(Error{kind, std::move(message)});
}

// "invalid_input", "timeout", ...: the spelling used in logs and JSON documents.
std::string_view to_string(ErrorKind kind);

// A message built from the current errno: "what: strerror(errno)".
std::string errno_message(std::string_view what);
std::string errno_message(std::string_view what, int saved_errno);

}  // namespace sandbox
