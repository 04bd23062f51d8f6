#pragma once
// Commit ids and merge-queue branch names as GitHub's events carry them. Plain string checks
// with no library behind them (no libgit2, no yaml-cpp): the agent daemon, whose --as-needed
// link must stay lean, uses them too.

#include <string>
#include <string_view>

namespace jobs {

// The branches GitHub's merge queue creates: gh-readonly-queue/BASE/pr-N-SHA.
inline constexpr std::string_view k_merge_queue_prefix = "refs/heads/gh-readonly-queue/";

// 40 lower-case hex digits: a full SHA-1 commit id as events spell it (40 zeros included, a
// push's `before` for a new branch).
bool is_commit_sha(std::string_view text);

struct MergeQueueRef {
    std::string base_ref;  // refs/heads/BASE, or empty
    std::string base_sha;  // the commit the group is stacked on (a full SHA), or empty
};

// refs/heads/gh-readonly-queue/release/1.x/pr-42-<sha> -> refs/heads/release/1.x and <sha>;
// both empty for any other ref; base_sha empty when the part after pr-N- is not a full SHA.
MergeQueueRef parse_merge_queue_ref(std::string_view head_ref);

}  // namespace jobs
