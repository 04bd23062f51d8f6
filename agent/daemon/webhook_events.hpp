#pragma once
// GitHub webhook deliveries -> what the queue should do. Handled events:
//   merge_group      checks_requested -> submit (head_sha, head_ref); destroyed -> cancel
//   pull_request     opened, synchronize, reopened -> submit (head.sha, refs/pull/N/head)
//   push             to a branch or tag -> submit (after, ref); a deletion is ignored
//   check_suite      requested -> submit; rerequested -> re-run (the next attempt)
//   check_run        rerequested -> re-run (the next attempt) of its head_sha
// A submitted job records its base (agent/daemon/job_base.hpp): a pull request's base.sha and
// base.ref, a merge group's base_sha and base_ref (else those its head ref names), a push's
// `before`, a check suite's `before` (a check run's check_suite.before).
// Everything else (and a pull request without the configured label, or of a repository not
// configured) is ignored with a one-line reason. The signature is checked before this runs.

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/store/job_store.hpp"
#include "common/error.hpp"

namespace agent {

enum class WebhookVerb { submit, rerun, cancel, ignore };

struct WebhookAction {
    WebhookVerb verb = WebhookVerb::ignore;
    JobSpec spec;        // submit / rerun: the job; cancel: repository and sha
    std::string reason;  // cancel: why; ignore: why
};

struct WebhookFilter {
    std::optional<std::string> pr_label;
    std::vector<std::string> repositories;  // empty: any
};

// True when a pull request object (webhook payload or REST answer) carries the label.
bool has_label(simdjson::dom::element pull_request, const std::string& label);

// invalid_input naming the missing field when a handled event's payload is malformed.
common::Expected<WebhookAction> webhook_action(std::string_view event, std::string_view body,
                                               const WebhookFilter& filter);

}  // namespace agent
