#include "jobs/runner_labels.hpp"

#include <algorithm>
#include <cctype>

namespace jobs {

std::vector<std::string> default_runner_labels() {
    return {"self-hosted", "linux", "x64", "ubuntu-latest", "ubuntu-*"};
}

bool label_matches(std::string_view pattern, std::string_view label) {
    auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
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

bool labels_satisfied(const std::vector<std::string>& wanted, const std::vector<std::string>& offered) {
    if (wanted.empty()) return false;
    return std::ranges::all_of(wanted, [&](const std::string& label) {
        return std::ranges::any_of(offered, [&](const std::string& ours) { return label_matches(ours, label); });
    });
}

}  // namespace jobs
