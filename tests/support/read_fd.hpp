#pragma once
// Reads a descriptor to EOF (a pipe whose write ends are all closed, a /proc file): the tests'
// one copy of the loop.

#include <unistd.h>

#include <string>

namespace tests {

inline std::string read_to_eof(int fd) {
    std::string text;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;)
        text.append(buffer, static_cast<std::size_t>(n));
    return text;
}

}  // namespace tests
