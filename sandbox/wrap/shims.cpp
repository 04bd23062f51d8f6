// The sandbox's runner tools (see shims.hpp).
#include "sandbox/wrap/shims.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <iterator>

namespace sandbox {

extern const unsigned char k_sudo_program[];
extern const std::size_t k_sudo_program_size;

namespace {

// Options that take a value (apt-get -o X, -c FILE, -t RELEASE) are skipped with it; the
// others are accepted and ignored (-y, -q, --no-install-recommends, --fix-missing, ...).
// A package may carry a version or a release (pkg=1.2, pkg/bookworm): the name is checked.
constexpr std::string_view k_apt_script = R"sh(#!/bin/sh
# sandgate's apt-get and apt inside the sandbox (sandbox/wrap/shims.hpp): a step may use the
# packages this machine has and cannot add any; its administrator adds them.
me=${0##*/}
command=
packages=
while [ $# -gt 0 ]; do
    case $1 in
        -o|-c|-t|--option|--config-file|--target-release|--default-release)
            [ $# -ge 2 ] && shift ;;
        --) shift; break ;;
        -*) ;;
        *) if [ -z "$command" ]; then command=$1; else packages="$packages $1"; fi ;;
    esac
    shift
done
for arg in "$@"; do packages="$packages $arg"; done
case $command in
    update)
        echo "$me update: nothing to update: sandgate's sandbox uses the packages this machine has"
        exit 0 ;;
    upgrade|dist-upgrade|full-upgrade|autoremove|autopurge|autoclean|clean)
        echo "$me $command: nothing to do: this machine's packages are its administrator's"
        exit 0 ;;
    install) ;;
    '')
        echo "E: $me: no command given (sandgate's sandbox offers install and update)" >&2
        exit 100 ;;
    *)
        echo "E: $me $command: not available in sandgate's sandbox (install of packages this machine has, and update, are)" >&2
        exit 100 ;;
esac
present=
missing=
for package in $packages; do
    name=${package%%=*}
    name=${name%%/*}
    if command -v dpkg-query >/dev/null 2>&1 &&
        dpkg-query -W -f='${db:Status-Abbrev}\n' "$name" 2>/dev/null | grep -q '^ii'; then
        present="$present $name"
    else
        missing="$missing $name"
    fi
done
if [ -n "$missing" ]; then
    echo "E: $me install: not installed on this machine:$missing; a step cannot add packages in sandgate's sandbox: the machine's administrator adds them (apt-get install$missing)" >&2
    exit 100
fi
if [ -z "$present" ]; then
    echo "$me install: nothing to install"
else
    echo "$me install: already installed on this machine:$present"
fi
exit 0
)sh";

bool executable(const char* path) {
    return ::access(path, X_OK) == 0;
}

}  // namespace

std::string_view sudo_program() {
    return {reinterpret_cast<const char*>(k_sudo_program), k_sudo_program_size};
}

std::string_view apt_script() {
    return k_apt_script;
}

std::vector<MountEntry> shim_programs() {
    const std::string dir(k_shim_dir);
    std::vector<MountEntry> entries;
    const auto program = [&](const char* name, std::string_view content) {
        MountEntry& entry = entries.emplace_back();
        entry.kind = MountKind::program;
        entry.dest = dir + "/" + name;
        entry.content = std::string(content);
        entry.priority = 1;
    };
    program("sudo", sudo_program());
    program("apt-get", apt_script());
    return entries;
}

std::vector<MountEntry> shim_mounts() {
    const std::string dir(k_shim_dir);
    std::vector<MountEntry> entries;
    entries.push_back({MountKind::symlink, dir + "/apt", "apt-get", {}, 1});
    for (const char* bin : {"/usr/bin", "/usr/local/bin"}) {
        const std::string python3 = std::string(bin) + "/python3";
        if (!executable(python3.c_str()) || executable((std::string(bin) + "/python").c_str()))
            continue;
        entries.push_back({MountKind::symlink, dir + "/python", python3, {}, 1});
        break;
    }
    if (::access("/var/lib/dpkg/status", R_OK) == 0)
        entries.push_back({MountKind::ro_bind_try, "/var/lib/dpkg", "/var/lib/dpkg", {}, 0});
    return entries;
}

void prepend_shim_path(Environment& env) {
    static constexpr std::string_view k_system[] = {
        "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"};
    for (auto& [key, value] : env) {
        if (key != "PATH") continue;
        // Before the first system directory: the machine's apt-get loses, what the job put in
        // front (the runner's externals, a tool cache's bin) keeps its place.
        std::size_t start = 0;
        while (start <= value.size()) {
            std::size_t end = value.find(':', start);
            if (end == std::string::npos) end = value.size();
            const std::string_view entry(value.data() + start, end - start);
            if (std::find(std::begin(k_system), std::end(k_system), entry) != std::end(k_system)) {
                value.insert(start, std::string(k_shim_dir) + ":");
                return;
            }
            start = end + 1;
        }
        value = value.empty() ? std::string(k_shim_dir) : value + ":" + std::string(k_shim_dir);
        return;
    }
    env.emplace_back("PATH", std::string(k_shim_dir) + ":/usr/local/bin:/usr/bin:/bin");
}

}  // namespace sandbox
