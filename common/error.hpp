#pragma once
// Errors are values across sandgate: every fallible library call returns
// common::Expected<T>, never throws and never exits. Exceptions are reserved for start-up
// configuration (command-line parsing).

#include <expected>
#include <string>
#include <string_view>
#include <type_traits>

namespace common {

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

}  // namespace common

// SANDGATE_TRY(expr): the one way an error is passed up. `expr` yields an Expected (of any
// value and error type); on an error, the enclosing function returns that error (as
// std::unexpected, so the function's own Expected may hold another value type); otherwise the
// whole TRY is the value, moved out (nothing for Expected<void>):
//     const auto text = SANDGATE_TRY(read_file(path));
//     SANDGATE_CHECK(write_file(path, text));   // an Expected<void>: SANDGATE_CHECK below
// A GNU statement expression (GCC and clang; `__extension__` keeps -Wpedantic quiet): the one
// construct that can both yield a value and return from the enclosing function. `expr` is
// evaluated once, into a copy, so an Expected held elsewhere is never moved from. Each TRY's
// variable has a name of its own (__COUNTER__), so a TRY inside a lambda inside a TRY shadows
// nothing.
#define SANDGATE_TRY(...) \
    SANDGATE_TRY_NAMED(SANDGATE_TRY_CONCAT(sandgate_try_result_, __COUNTER__), __VA_ARGS__)
#define SANDGATE_TRY_CONCAT(a, b) SANDGATE_TRY_CONCAT_TOKENS(a, b)
#define SANDGATE_TRY_CONCAT_TOKENS(a, b) a##b
#define SANDGATE_TRY_NAMED(result, ...)                        \
    __extension__({                                            \
        auto result = (__VA_ARGS__);                           \
        if (!result) [[unlikely]]                              \
            return std::unexpected(std::move(result).error()); \
        std::move(result).value();                             \
    })

// SANDGATE_CHECK(expr): TRY as a statement, for an Expected<void> only. A TRY whose value is
// dropped is refused: the value may be a guard (a lock, a lease, a record) that must live to
// the end of the scope, and a TRY standing as a statement destroys it at once. Name it
// (`const auto lock = SANDGATE_TRY(...)`) or drop it on purpose (`(void)SANDGATE_TRY(...)`).
// The build's rules (cmake/check_layering.cmake) refuse a TRY standing as a statement.
#define SANDGATE_CHECK(...) \
    SANDGATE_CHECK_NAMED(SANDGATE_TRY_CONCAT(sandgate_check_result_, __COUNTER__), __VA_ARGS__)
#define SANDGATE_CHECK_NAMED(result, ...)                                                        \
    do {                                                                                         \
        auto result = (__VA_ARGS__);                                                             \
        static_assert(std::is_void_v<typename decltype(result)::value_type>,                     \
                      "SANDGATE_CHECK drops a value (maybe a guard): name it, or (void)TRY it"); \
        if (!result) [[unlikely]]                                                                \
            return std::unexpected(std::move(result).error());                                   \
    } while (false)
