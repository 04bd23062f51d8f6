#include "jobs/workflow/runner_labels.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>

#include "jobs/expr/value.hpp"

namespace jobs {
namespace {

struct LabelPlatform {
    std::optional<std::string> os;
    std::optional<std::string> arch;
};

// What a label says about the machine, in GitHub's naming: hosted images (`ubuntu-*` x64 and
// `ubuntu-*-arm` arm64, `windows-*`, `macos-*`) and the architecture labels of self-hosted
// runners (x64, arm64, ...).
LabelPlatform platform_of(std::string_view label) {
    const std::string folded = fold_case(label);
    LabelPlatform out;
    if (folded == "X64" || folded == "X86" || folded == "ARM" || folded == "ARM64")
        out.arch = folded;
    if (folded == "AARCH64") out.arch = "ARM64";
    if (folded == "LINUX" || folded.starts_with("UBUNTU")) out.os = "Linux";
    if (folded == "WINDOWS" || folded.starts_with("WINDOWS-")) out.os = "Windows";
    if (folded == "MACOS" || folded.starts_with("MACOS-")) out.os = "macOS";
    if (folded.starts_with("UBUNTU-") || folded.starts_with("WINDOWS-")) {
        out.arch = folded.ends_with("-ARM") || folded.ends_with("-ARM64") ? "ARM64" : "X64";
    }
    return out;
}

}  // namespace

std::string runner_arch(std::string_view machine) {
    if (machine == "x86_64" || machine == "amd64") return "X64";
    if (machine == "aarch64" || machine == "arm64") return "ARM64";
    if (machine.starts_with("arm")) return "ARM";
    if (machine.size() == 4 && machine[0] == 'i' && machine.substr(2) == "86") return "X86";
    std::string out(machine);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

RunnerPlatform host_platform() {
    RunnerPlatform platform;
    struct utsname name {};
    if (::uname(&name) == 0) platform.arch = runner_arch(name.machine);
    return platform;
}

std::vector<std::string> default_runner_labels(const RunnerPlatform& platform) {
    std::string arch = platform.arch;
    for (char& c : arch) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::vector<std::string> labels{"self-hosted", "linux", arch};
    if (platform.arch == "X64") labels.emplace_back("ubuntu-latest");
    labels.emplace_back("ubuntu-*");
    return labels;
}

bool label_matches(std::string_view pattern, std::string_view label) {
    auto lower = [](char c) {
        return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    };
    // Iterative glob with one backtrack point for the last `*`.
    std::size_t p = 0, l = 0, star = std::string_view::npos, mark = 0;
    while (l < label.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || lower(pattern[p]) == lower(label[l]))) {
            ++p;
            ++l;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = l;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            l = ++mark;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

bool labels_satisfied(const std::vector<std::string>& wanted,
                      const std::vector<std::string>& offered) {
    if (wanted.empty()) return false;
    return std::ranges::all_of(wanted, [&](const std::string& label) {
        return std::ranges::any_of(
            offered, [&](const std::string& ours) { return label_matches(ours, label); });
    });
}

std::optional<std::string> platform_mismatch(const std::vector<std::string>& wanted,
                                             const std::vector<std::string>& offered,
                                             const RunnerPlatform& platform) {
    for (const auto& label : wanted) {
        if (std::ranges::any_of(
                offered, [&](const std::string& ours) { return equals_ignore_case(ours, label); }))
            continue;
        const LabelPlatform says = platform_of(label);
        const bool other_os = says.os && *says.os != platform.os;
        const bool other_arch = says.arch && *says.arch != platform.arch;
        if (!other_os && !other_arch) continue;
        const std::string machine =
            says.os.value_or(platform.os) + (says.arch ? " " + *says.arch : "");
        return label + " asks for a " + machine + " machine; this one is " + platform.os + " " +
               platform.arch + " (--label " + label + " runs it here anyway)";
    }
    return std::nullopt;
}

}  // namespace jobs
