#include "common/error.hpp"

#include <cerrno>
#include <cstring>

namespace common {

std::string_view to_string(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::invalid_input:
            return "invalid_input";
        case ErrorKind::timeout:
            return "timeout";
        case ErrorKind::unavailable:
            return "unavailable";
        case ErrorKind::transient:
            return "transient";
        case ErrorKind::permanent:
            return "permanent";
    }
    return "permanent";
}

std::string errno_message(std::string_view what, int saved_errno) {
    std::string message(what);
    message += ": ";
    message += std::strerror(saved_errno);
    return message;
}

std::string errno_message(std::string_view what) {
    return errno_message(what, errno);
}

}  // namespace common
