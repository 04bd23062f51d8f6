// default_state_dir() (agent_config.hpp), in a file of its own: the `sandgate` launcher links
// it (policy_options' default tool cache) without the configuration loader and its parsers.
#include <cstdlib>

#include "agent/daemon/agent_config.hpp"

namespace agent {

std::filesystem::path default_state_dir() {
    if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg)
        return std::filesystem::path(xdg) / "sandgate";
    const char* home = std::getenv("HOME");
    return std::filesystem::path(home && *home ? home : "/var/lib") / ".local/state/sandgate";
}

}  // namespace agent
