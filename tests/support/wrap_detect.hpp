#pragma once
// Tests that cannot run inside sandgate's own wrap (they mount /proc in a nested pid
// namespace, need a writable cgroup, ...) skip there, and only there, with a marker line that
// the dogfood run counts:
//
//   SKIP_UNDER_WRAP("nested pid namespace cannot mount /proc");
//
// Outside the wrap the macro does nothing. Nowhere else may a test skip.

#include <cstdio>
#include <string_view>

namespace tests {

// True when this process runs inside a bubblewrap sandbox (pid 1 of our pid namespace is
// bwrap, or the marker variable SANDGATE_UNDER_WRAP=1 was passed in).
bool under_wrap();

}  // namespace tests

#define SKIP_UNDER_WRAP(reason)                           \
    do {                                                  \
        if (::tests::under_wrap()) {                      \
            std::printf("SKIP-UNDER-WRAP(%s)\n", reason); \
            std::fflush(stdout);                          \
            SUCCEED("skipped under the wrap: " reason);   \
            return;                                       \
        }                                                 \
    } while (false)
