#include "agent/cli/terminal_text.hpp"

#include <unistd.h>

#include <cerrno>

namespace agent {

std::string one_line(std::string text) {
    for (auto& c : text)
        if (c == '\n' || c == '\r') c = ' ';
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text;
}

WriteOutcome write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return WriteOutcome::reader_gone;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return WriteOutcome::written;
}

}  // namespace agent
