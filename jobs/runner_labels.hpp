#pragma once
// `runs-on` against the labels this runner offers. A job runs here when every label it asks
// for matches one of ours (GitHub's rule for self-hosted runners); ours may be globs
// (`ubuntu-*`), matched case-insensitively as GitHub does.

#include <string>
#include <string_view>
#include <vector>

namespace jobs {

// self-hosted, linux, x64, ubuntu-latest, ubuntu-*.
std::vector<std::string> default_runner_labels();

// True when `label` matches `pattern` (`*` any run of characters, `?` one), ignoring case.
bool label_matches(std::string_view pattern, std::string_view label);

// True when every wanted label matches one of `offered`. An empty `wanted` never matches.
bool labels_satisfied(const std::vector<std::string>& wanted, const std::vector<std::string>& offered);

}  // namespace jobs
