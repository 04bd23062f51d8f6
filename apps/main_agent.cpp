// `sandgate-agent`: the agent daemon, without libcurl, libgit2 or OpenSSL (its GitHub traffic
// runs in `sandgate-full agent-github` rounds); started by `sandgate agent`
// (agent/cli/launcher.hpp).
#include "agent/cli/launcher.hpp"

int main(int argc, char** argv) {
    return agent::agent_main(argc, argv);
}
