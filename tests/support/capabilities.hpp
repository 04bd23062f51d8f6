#pragma once
// Whether this process holds CAP_SYS_ADMIN in its user namespace (CapEff in /proc/self/status):
// what making or joining a namespace needs. Root on the host has it; sandgate's own wrap and an
// unprivileged user do not.

#include <fstream>
#include <string>

namespace tests {

inline bool has_cap_sys_admin() {
    constexpr unsigned long long k_cap_sys_admin = 21;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("CapEff:", 0) == 0)
            return ((std::stoull(line.substr(7), nullptr, 16) >> k_cap_sys_admin) & 1) != 0;
    }
    return false;
}

}  // namespace tests
