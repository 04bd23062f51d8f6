#pragma once
// The files an event changed, computed with libgit2 (never by running git), for the `paths` /
// `paths-ignore` workflow trigger filters (jobs/workflow/workflow_events.hpp applies them).
// GitHub's comparisons ("Git diff comparisons", workflow syntax, on.<push|pull_request>.paths):
//   pull_request, pull_request_target: a three-dot diff, merge-base(base, head)..head, from
//     payload pull_request.base.sha and pull_request.head.sha (base..head when the two have
//     no common ancestor). Without a base SHA, or with one the repository lacks (the base
//     branch was force-pushed), the base is the tip of pull_request.base.ref (refs/heads/REF,
//     else refs/remotes/origin/REF), as GitHub compares a pull request with its base branch;
//   push: a two-dot diff, before..after. A new branch (`before` all zeros): GitHub diffs
//     "against the parent of the ancestor of the deepest commit pushed"; sandgate diffs
//     against the merge base of `after` and the default branch (payload
//     repository.default_branch, else refs/remotes/origin/HEAD, else a bare repository's HEAD:
//     a mirror's HEAD follows the remote's, jobs/git/git_fetch.cpp),
//     which is the same commit when the branch was made from the default branch; without a
//     default branch or a common ancestor, every file of `after` counts as changed. A branch
//     created at a commit already on the default branch changed nothing. A deleted branch
//     (`after` all zeros) changed nothing. A push of more than 1,000 commits is not diffed:
//     GitHub then runs the workflow regardless, and so does sandgate (an error, failing open).
// A rename counts its old and its new path (renames found by libgit2's similarity, 50%);
// additions, modifications, deletions and type changes count their path.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "jobs/expr/value.hpp"
#include "jobs/workflow/workflow_events.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace jobs {

// The files changed from commit `from` to commit `to` (40-hex SHAs) in the repository at
// `repository` (a work tree or a bare repository such as a mirror); `from` empty: every file
// of `to`. Only the first k_paths_diff_limit entries' paths are kept (ChangedFiles::files
// counts them all). Errors: invalid_input (not a SHA), unavailable (a commit is not in the
// repository, or the repository cannot be opened), permanent (another libgit2 failure).
common::Expected<ChangedFiles> diff_commits(const std::filesystem::path& repository,
                                            std::string_view from, std::string_view to);

// The files the event changed (above). Errors: invalid_input (the event has no paths
// filters, or the payload lacks a SHA it needs), unavailable (a commit is not in the
// repository, or a push of more than 1,000 commits), permanent; every message names the event
// and the SHAs.
common::Expected<ChangedFiles> event_changed_files(const std::filesystem::path& repository,
                                                   std::string_view event_name,
                                                   const Value& payload);

struct EventSelection {
    std::vector<Workflow> workflows;    // those that run, in the given order
    std::vector<std::string> warnings;  // one line each, for the caller to print
};

// The workflows that run for the event (event_matches). The changed files are computed once,
// and only when a workflow the other filters admit has a paths filter. When they cannot be,
// paths filters are not applied and the workflows run (fail open: a required check that
// silently never runs blocks the merge), with a warning naming the event and the SHAs.
EventSelection select_for_event(std::vector<Workflow> workflows, std::string_view event_name,
                                const Value& payload, const std::filesystem::path& repository);

}  // namespace jobs
