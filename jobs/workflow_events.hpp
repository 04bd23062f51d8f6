#pragma once
// Which workflows an event triggers: the event must be under the workflow's `on:`, and the
// trigger's filters must admit the payload. Filter globs follow GitHub's rules (`*` within a
// path component, `**` across components, `?` one character); `branches`/`tags` list what
// runs, `branches-ignore`/`tags-ignore` what does not.
//
// Pure functions of the parsed workflow and the payload: no I/O, never throws.

#include <string_view>

#include "jobs/value.hpp"
#include "jobs/workflow_model.hpp"

namespace jobs {

// True when `workflow` runs for `event_name` with this payload: the event is under `on:`
// and its filters (types against payload.action; branches/tags against payload.ref for
// push and pull_request base refs) admit it. Filters are not applied when the payload lacks
// what they test.
bool event_matches(const Workflow& workflow, std::string_view event_name, const Value& payload);

}  // namespace jobs
