#pragma once
// `sandgate doctor`: what this machine allows the wrap to use, and the strongest posture that
// can be had. Every check runs for real (the namespaces probe forks and unshares; bwrap and the
// runtimes are asked for their versions).

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/access/safe_access.hpp"
#include "sandbox/base.hpp"

namespace sandbox {

struct DoctorCheck {
    std::string name;  // "bwrap", "user_namespaces", ...
    bool ok = false;
    std::string detail;  // the version, the value, or what is wrong and what to do
};

struct DoctorReport {
    std::vector<DoctorCheck> checks;
    std::string strongest;           // "bwrap", "container" or "off"
    bool default_available = false;  // --sandbox bwrap --network none can be had

    nlohmann::ordered_json to_json() const;
    std::string to_text() const;
};

// `identity`: the --sandbox-user to report (unset: the default).
DoctorReport run_doctor(const std::optional<Owner>& identity = std::nullopt);

// `sandgate doctor --packages`: what a repository's workflows ask apt to install (the
// `apt-get install` / `apt install` commands of their files, continuation lines joined,
// options skipped, pkg=VERSION and pkg/RELEASE read as pkg), and which of those this machine
// lacks: inside the wrap `apt-get install` succeeds only for packages the machine has
// (shims.hpp), so these are what its administrator installs.
struct PackageAsk {
    std::string package;
    std::string where;  // FILE:LINE
    bool installed = false;
};

struct PackagesReport {
    std::vector<PackageAsk> asks;         // in file and line order, each package once
    std::vector<std::string> unresolved;  // FILE:LINE: a word with $ or ${{ }} (not looked up)
    bool dpkg = true;                     // false: this machine has no dpkg database

    bool complete() const;  // every package asked for is installed
    nlohmann::ordered_json to_json() const;
    std::string to_text() const;
};

// The packages `text` (one workflow file, named `file`) asks apt to install; words holding
// an expression or a variable go to `unresolved`.
std::vector<PackageAsk> package_asks(std::string_view text, std::string_view file,
                                     std::vector<std::string>& unresolved);

// The installed packages of this machine (dpkg's status, `dpkg-query -W`), sorted; nullopt
// when there is no dpkg.
std::optional<std::vector<std::string>> installed_packages();

// Reads `repository`/.github/workflows/*.yml|*.yaml (beneath the directory, no links
// followed, at most 1 MiB each) and checks each package against installed_packages().
Expected<PackagesReport> workflow_packages(const std::filesystem::path& repository);

}  // namespace sandbox
