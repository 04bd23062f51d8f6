// `sandgate`: the launcher (exec in-process, everything else in sandgate-full).
#include <unistd.h>

#include <cstdio>

#include "agent/launcher.hpp"

// A command run in-process (`sandgate exec`) ends the process: the static destructors would
// only free memory and close fds that the exit releases anyway (~40 us per run), so the
// buffered output is flushed and the process leaves without them.
int main(int argc, char** argv) {
    const int status = agent::launcher_main(argc, argv);
    std::fflush(nullptr);
    ::_exit(status);
}
