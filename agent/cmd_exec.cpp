// Placeholder until the process core lands (issue 2): refuses, running nothing.
#include <cstdio>

#include "agent/commands.hpp"

namespace agent {

int exec_command(CommandArgs) {
    std::fprintf(stderr, "sandgate exec: not available in this build\n");
    return 125;
}

}  // namespace agent
