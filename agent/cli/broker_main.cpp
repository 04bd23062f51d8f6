// `sandgate-broker`'s main (agent/cli/launcher.hpp), in its own file: the static `sandgate` must
// not pull the broker (spdlog, simdjson) in through launcher.cpp.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/commands.hpp"
#include "agent/cli/launcher.hpp"

namespace agent {

int broker_main(int argc, char** argv) {
    constexpr int k_exit_usage = 2;
    if (argc < 2 || std::string_view(argv[1]) != "broker") {
        std::fprintf(
            stderr,
            "sandgate-broker: usage: sandgate-broker broker OPTIONS (started by sandgate)\n");
        return k_exit_usage;
    }
    std::string program = "sandgate broker";
    std::vector<char*> args{program.data()};
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    return broker_command(CommandArgs(args));
}

}  // namespace agent
