// `sandgate-broker`: the job-sandbox broker; started by `sandgate broker` (agent/cli/launcher.hpp).
#include "agent/cli/launcher.hpp"

int main(int argc, char** argv) {
    return agent::broker_main(argc, argv);
}
