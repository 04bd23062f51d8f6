// The agent's configuration file (agent/daemon/agent_config.hpp) and the units its values use.
#include "agent/daemon/agent_config.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "agent/cli/units.hpp"
#include "fuzz/fuzz_target.hpp"

SANDGATE_FUZZ_TARGET(agent_config) {
    const std::string_view input = fuzz::text(data, size);
    (void)agent::parse_duration(input);
    (void)agent::parse_bytes(input);
    static const std::filesystem::path file =
        std::filesystem::temp_directory_path() /
        ("sandgate-fuzz-config-" + std::to_string(::getpid()) + ".yml");
    if (std::FILE* out = std::fopen(file.c_str(), "wb")) {
        std::fwrite(input.data(), 1, input.size(), out);
        std::fclose(out);
    }
    auto config = agent::load_agent_config(file);
    if (!config) fuzz::check_one_line(config.error().message);
    return 0;
}
