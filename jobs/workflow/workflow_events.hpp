#pragma once
// Which workflows an event triggers: the event must be under the workflow's `on:`, and the
// trigger's filters must admit the payload. Patterns follow GitHub's filter pattern cheat
// sheet: `*` within a path component, `**` across components, `?` zero or one and `+` one or
// more of the preceding character or [class], a backslash escapes; `branches`/`tags` list what
// runs, in order, a `!pattern` excluding what an earlier one admitted;
// `branches-ignore`/`tags-ignore` list what does not run. `paths` lists, in the same ordered way,
// the changed files that make the workflow run (at least one must be admitted); `paths-ignore`
// skips the workflow only when every changed file matches it. The changed files come from the
// caller (jobs/git/changed_paths.hpp computes them with libgit2); GitHub looks at the first 300
// files of the diff only.
//
// Pure functions of the parsed workflow, the payload and the changed files: no I/O, never throws.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/expr/value.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace jobs {

// GitHub evaluates paths filters against the first 300 files of the diff only: a change whose
// only matching file comes later does not run a `paths` workflow ("Diffs are limited to 300
// files", workflow syntax, on.<push|pull_request>.paths).
inline constexpr std::size_t k_paths_diff_limit = 300;

// The files an event changed, in diff order (by path). A rename contributes its old and its
// new path. `files` counts the diff's entries (a rename is one); `paths` holds the paths of
// the first k_paths_diff_limit entries only.
struct ChangedFiles {
    std::vector<std::string> paths;
    std::size_t files = 0;
};

// True when `workflow`'s trigger for `event_name` has `paths` or `paths-ignore` (only push,
// pull_request and pull_request_target may; the model refuses them elsewhere).
bool has_paths_filter(const Workflow& workflow, std::string_view event_name);

// The trigger's paths/paths-ignore (`filters`: EventTrigger::filters) against the changed
// files: `paths` admits when at least one path's last matching pattern is not a `!pattern`;
// `paths-ignore` admits when at least one path matches none of its patterns. No changed file
// admits neither (GitHub: "If there are no files changed, the workflow will not run"). True
// when the trigger has no paths filter.
bool paths_filter_admits(const YamlNode& filters, std::span<const std::string> changed);

// True when `workflow` runs for `event_name` with this payload: the event is under `on:`
// and its filters (types against payload.action; branches/tags against payload.ref for push,
// the base branch for pull_request* and merge_group) admit it, and, when `changed` is given,
// its paths filters admit those files (both must pass). Filters are not applied when the
// payload lacks what they test; paths filters are not applied when `changed` is null (the
// diff is unknown: the workflow runs) nor to tag pushes (GitHub does not evaluate them there).
bool event_matches(const Workflow& workflow, std::string_view event_name, const Value& payload,
                   const ChangedFiles* changed = nullptr);

// The target branch of a merge queue's branch, as a ref: refs/heads/gh-readonly-queue/
// release/1.x/pr-42-<sha> -> refs/heads/release/1.x; empty for any other ref. For payloads that
// carry merge_group.head_ref without base_ref.
std::string merge_queue_base_ref(std::string_view head_ref);

// One filter pattern against a branch, tag or path name (GitHub's syntax, above; no `!`).
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace jobs
