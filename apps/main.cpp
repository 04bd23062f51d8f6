// `sandgate`: the launcher (exec in-process, everything else in sandgate-full).
#include <malloc.h>
#include <unistd.h>

#include <cstdio>

#include "agent/cli/launcher.hpp"

// A command run in-process (`sandgate exec`) ends the process: the static destructors would
// only free memory and close fds that the exit releases anyway (~40 us per run), so the
// buffered output is flushed and the process leaves without them.
//
// One malloc arena: a wrapped run's helper threads (sandbox/wrap/netns.hpp, the plan's completion)
// would each get an arena of their own (a 64 MiB reservation, its first pages faulted in, all
// of it torn down at exit), though they barely overlap in malloc with the main thread, which
// waits for them. About -50 us per `sandgate exec`, measured over 1500 shuffled runs.
int main(int argc, char** argv) {
    ::mallopt(M_ARENA_MAX, 1);
    const int status = agent::launcher_main(argc, argv);
    std::fflush(nullptr);
    ::_exit(status);
}
