#include "agent/launcher.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "agent/commands.hpp"

namespace agent {
namespace {

constexpr int k_exit_not_found = 127;

// The directory of this executable: /proc/self/exe, not argv[0], which a caller chooses.
std::filesystem::path own_directory() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path() : self.parent_path();
}

}  // namespace

int launcher_main(int argc, char** argv) {
    // The job-sandbox broker runs here too: it lives as long as its job and forks every step,
    // and a small process starts faster and is cheaper to fork than sandgate-full.
    const std::string_view name = argc >= 2 ? argv[1] : "";
    if (name == "exec" || name == "broker") {
        std::string program = "sandgate " + std::string(name);
        std::vector<char*> args{program.data()};
        for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
        return name == "exec" ? exec_command(CommandArgs(args)) : broker_command(CommandArgs(args));
    }
    const auto full = own_directory() / k_full_binary_name;
    ::execv(full.c_str(), argv);
    std::fprintf(stderr, "sandgate: cannot start %s: %s (install it beside sandgate)\n",
                 full.c_str(), std::strerror(errno));
    return k_exit_not_found;
}

}  // namespace agent
