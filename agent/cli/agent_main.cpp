// `sandgate-agent`'s main (agent/cli/launcher.hpp), in its own file: the static `sandgate` must not
// pull the daemon in through launcher.cpp.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/commands.hpp"
#include "agent/cli/launcher.hpp"
#include "common/warnings.hpp"

namespace agent {

int agent_main(int argc, char** argv) {
    constexpr int k_exit_usage = 2;
    if (argc < 2 || std::string_view(argv[1]) != "agent") {
        std::fprintf(stderr,
                     "sandgate-agent: usage: sandgate-agent agent OPTIONS (started by sandgate)\n");
        return k_exit_usage;
    }
    common::set_warning_sink([](std::string_view message) { spdlog::warn("{}", message); });
    std::string program = "sandgate agent";
    std::vector<char*> args{program.data()};
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    return agent_command(CommandArgs(args));
}

}  // namespace agent
