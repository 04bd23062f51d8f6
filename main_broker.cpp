// `sandgate-broker`: the job-sandbox broker; started by `sandgate broker` (agent/launcher.hpp).
#include "agent/launcher.hpp"

int main(int argc, char** argv) {
    return agent::broker_main(argc, argv);
}
