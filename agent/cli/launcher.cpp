#include "agent/cli/launcher.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/commands.hpp"

namespace agent {
namespace {

constexpr int k_exit_not_found = 127;

// The directory of this executable: /proc/self/exe, not argv[0], which a caller chooses.
std::filesystem::path own_directory() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path() : self.parent_path();
}

// `sandgate NAME ARGS...` as the command table expects it: argv[0] "sandgate NAME".
int run_command(int argc, char** argv, int (*command)(CommandArgs)) {
    std::string program = "sandgate " + std::string(argv[1]);
    std::vector<char*> args{program.data()};
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    return command(CommandArgs(args));
}

}  // namespace

int launcher_main(int argc, char** argv) {
    const std::string_view name = argc >= 2 ? argv[1] : "";
    if (name == "exec") return run_command(argc, argv, exec_command);
    // The job-sandbox broker lives as long as its job and forks every step: a small process
    // starts faster and is cheaper to fork than sandgate-full.
    // The agent daemon idles for days: a binary that loads no GitHub libraries.
    const char* other = name == "broker"  ? k_broker_binary_name
                        : name == "agent" ? k_agent_binary_name
                                          : k_full_binary_name;
    const auto binary = own_directory() / other;
    ::execv(binary.c_str(), argv);
    std::fprintf(stderr, "sandgate: cannot start %s: %s (install it beside sandgate)\n",
                 binary.c_str(), std::strerror(errno));
    return k_exit_not_found;
}

}  // namespace agent
