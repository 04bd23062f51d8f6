#include "common/warnings.hpp"

#include <unistd.h>

#include <atomic>
#include <string>

namespace common {
namespace {

std::atomic<WarningSink> g_sink{nullptr};

}  // namespace

void set_warning_sink(WarningSink sink) {
    g_sink.store(sink);
}

void warn(std::string_view message) {
    if (const WarningSink sink = g_sink.load()) return sink(message);
    // One write, so that concurrent warnings do not interleave mid-line.
    std::string line = "sandgate: warning: ";
    line.append(message);
    line.push_back('\n');
    (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace common
