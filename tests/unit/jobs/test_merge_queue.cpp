// Merge-queue branch names and commit ids (jobs/workflow/merge_queue.cpp): the one parser the
// workflow filters (base ref) and the agent's job base (ref and SHA) both use.
#include <catch2/catch.hpp>
#include <string>

#include "jobs/workflow/merge_queue.hpp"

TEST_CASE("is_commit_sha: 40 lower-case hex digits, 40 zeros included") {
    CHECK(jobs::is_commit_sha(std::string(40, '0')));
    CHECK(jobs::is_commit_sha("0123456789abcdef0123456789abcdef01234567"));
    CHECK_FALSE(jobs::is_commit_sha("0123456789ABCDEF0123456789abcdef01234567"));
    CHECK_FALSE(jobs::is_commit_sha(std::string(39, 'a')));
    CHECK_FALSE(jobs::is_commit_sha(std::string(64, 'a')));
    CHECK_FALSE(jobs::is_commit_sha(""));
}

TEST_CASE("parse_merge_queue_ref: the base branch and the commit the group is stacked on") {
    const std::string sha = "0123456789abcdef0123456789abcdef01234567";
    auto parsed =
        jobs::parse_merge_queue_ref("refs/heads/gh-readonly-queue/release/pr-1/pr-42-" + sha);
    CHECK(parsed.base_ref == "refs/heads/release/pr-1");
    CHECK(parsed.base_sha == sha);
    parsed = jobs::parse_merge_queue_ref("refs/heads/gh-readonly-queue/main/pr-7-0123abcd");
    CHECK(parsed.base_ref == "refs/heads/main");
    CHECK(parsed.base_sha.empty());
    parsed = jobs::parse_merge_queue_ref("refs/heads/gh-readonly-queue/pr-1-" + sha);
    CHECK(parsed.base_ref.empty());
    CHECK(parsed.base_sha.empty());
    parsed = jobs::parse_merge_queue_ref("refs/heads/main");
    CHECK(parsed.base_ref.empty());
    CHECK(parsed.base_sha.empty());
}
