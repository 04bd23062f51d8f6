// `sandgate-full`: every command; started by `sandgate` (see agent/cli/launcher.hpp).
#include "agent/cli/cli.hpp"

int main(int argc, char** argv) {
    return agent::main(argc, argv);
}
