#include "jobs/workflow/merge_queue.hpp"

namespace jobs {

bool is_commit_sha(std::string_view text) {
    return text.size() == 40 &&
           text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

MergeQueueRef parse_merge_queue_ref(std::string_view head_ref) {
    if (!head_ref.starts_with(k_merge_queue_prefix)) return {};
    head_ref.remove_prefix(k_merge_queue_prefix.size());
    // rfind: the base branch may itself contain "/pr-".
    const std::size_t pr = head_ref.rfind("/pr-");
    if (pr == std::string_view::npos || pr == 0) return {};
    MergeQueueRef parsed;
    parsed.base_ref = "refs/heads/" + std::string(head_ref.substr(0, pr));
    // pr-N-SHA: the SHA after the last '-'.
    const std::string_view tail = head_ref.substr(pr + 4);
    if (const std::size_t dash = tail.rfind('-');
        dash != std::string_view::npos && is_commit_sha(tail.substr(dash + 1)))
        parsed.base_sha = std::string(tail.substr(dash + 1));
    return parsed;
}

}  // namespace jobs
