// `sandgate-full`: every command; started by `sandgate` (see agent/launcher.hpp).
#include "agent/cli.hpp"

int main(int argc, char** argv) {
    return agent::main(argc, argv);
}
