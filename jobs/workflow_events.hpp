#pragma once
// Which workflows an event triggers: the event must be under the workflow's `on:`, and the
// trigger's filters must admit the payload. Patterns follow GitHub's filter pattern cheat
// sheet: `*` within a path component, `**` across components, `?` zero or one and `+` one or
// more of the preceding character or [class], a backslash escapes; `branches`/`tags` list what runs,
// in order, a `!pattern` excluding what an earlier one admitted; `branches-ignore`/`tags-ignore`
// list what does not run. `paths` filters are not applied (the payload does not carry the
// changed files).
//
// Pure functions of the parsed workflow and the payload: no I/O, never throws.

#include <string>
#include <string_view>

#include "jobs/value.hpp"
#include "jobs/workflow_model.hpp"

namespace jobs {

// True when `workflow` runs for `event_name` with this payload: the event is under `on:`
// and its filters (types against payload.action; branches/tags against payload.ref for push,
// the base branch for pull_request* and merge_group) admit it. Filters are not applied when
// the payload lacks what they test.
bool event_matches(const Workflow& workflow, std::string_view event_name, const Value& payload);

// The target branch of a merge queue's branch, as a ref: refs/heads/gh-readonly-queue/
// release/1.x/pr-42-<sha> -> refs/heads/release/1.x; empty for any other ref. For payloads that
// carry merge_group.head_ref without base_ref.
std::string merge_queue_base_ref(std::string_view head_ref);

// One filter pattern against a branch, tag or path name (GitHub's syntax, above; no `!`).
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace jobs
