#pragma once
// `sandgate doctor`: what this machine allows the wrap to use, and the strongest posture that
// can be had. Every check runs for real (the namespaces probe forks and unshares; bwrap and the
// runtimes are asked for their versions).

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/safe_access.hpp"

namespace sandbox {

struct DoctorCheck {
    std::string name;    // "bwrap", "user_namespaces", ...
    bool ok = false;
    std::string detail;  // the version, the value, or what is wrong and what to do
};

struct DoctorReport {
    std::vector<DoctorCheck> checks;
    std::string strongest;       // "bwrap", "container" or "off"
    bool default_available = false;  // --sandbox bwrap --network none can be had

    nlohmann::ordered_json to_json() const;
    std::string to_text() const;
};

// `identity`: the --sandbox-user to report (unset: the default).
DoctorReport run_doctor(const std::optional<Owner>& identity = std::nullopt);

}  // namespace sandbox
