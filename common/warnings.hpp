#pragma once
// Warnings the sandbox library cannot return as values (a destructor's failed clean-up, say).
// They go to the installed sink; sandgate-full installs one that logs through spdlog. Until
// one is installed (the `sandgate` launcher links neither spdlog nor fmt, to start fast) a
// warning is one line on stderr, "sandgate: warning: MESSAGE", as spdlog would print it.

#include <string_view>

namespace common {

using WarningSink = void (*)(std::string_view message);

// Install at start-up, before any run; null restores the stderr line.
void set_warning_sink(WarningSink sink);
void warn(std::string_view message);

}  // namespace common
