#pragma once
// Whether this process holds CAP_SYS_ADMIN in its user namespace (CapEff in /proc/self/status):
// what making or joining a namespace needs. Root on the host has it; sandgate's own wrap and an
// unprivileged user do not.

#include <fstream>
#include <string>

#include "tests/support/numbers.hpp"

namespace tests {

inline bool has_cap_sys_admin() {
    constexpr unsigned long long k_cap_sys_admin = 21;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("CapEff:", 0) == 0)
            return ((tests::to_number<unsigned long long>(std::string_view(line).substr(7), 16)
                         .value_or(0) >>
                     k_cap_sys_admin) &
                    1) != 0;
    }
    return false;
}

}  // namespace tests
