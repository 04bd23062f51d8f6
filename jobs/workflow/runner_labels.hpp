#pragma once
// `runs-on` against the labels this runner offers. A job runs here when every label it asks
// for matches one of ours (GitHub's rule for self-hosted runners); ours may be globs
// (`ubuntu-*`), matched case-insensitively as GitHub does. A label that names another
// operating system or architecture than this machine's (`windows-latest`, `macos-14`,
// `ubuntu-24.04-arm` or `arm64` on x86_64, `x64` or `ubuntu-latest` on arm64) is refused even
// where a glob of ours would match it, unless one of our labels is that very label (given with
// `--label`: the caller vouches for it).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jobs {

// The machine in runner.os / runner.arch's words: os "Linux"; arch "X86", "X64", "ARM" or
// "ARM64" (another machine name: upper-cased as uname gives it).
struct RunnerPlatform {
    std::string os = "Linux";
    std::string arch = "X64";
};

// This machine (uname(2)); X64 when uname fails.
RunnerPlatform host_platform();
// uname's machine name in runner.arch's words: x86_64 -> X64, aarch64 -> ARM64, armv7l -> ARM,
// i686 -> X86.
std::string runner_arch(std::string_view machine);

// self-hosted, linux, the arch's label (x64, arm64, ...), then ubuntu-latest (on X64 only:
// GitHub's image of that name is x64) and ubuntu-*.
std::vector<std::string> default_runner_labels(const RunnerPlatform& platform = host_platform());

// True when `label` matches `pattern` (`*` any run of characters, `?` one), ignoring case.
bool label_matches(std::string_view pattern, std::string_view label);

// True when every wanted label matches one of `offered`. An empty `wanted` never matches.
bool labels_satisfied(const std::vector<std::string>& wanted,
                      const std::vector<std::string>& offered);

// Why `wanted` cannot run on `platform`, naming the first label that names another OS or
// architecture ("ubuntu-24.04-arm asks for a Linux ARM64 machine; this one is Linux X64
// (--label ubuntu-24.04-arm runs it here anyway)"); nullopt when none does. A label equal
// (ignoring case) to one of `offered` is not questioned.
std::optional<std::string> platform_mismatch(const std::vector<std::string>& wanted,
                                             const std::vector<std::string>& offered,
                                             const RunnerPlatform& platform);

}  // namespace jobs
