#include "agent/daemon/webhook_events.hpp"

#include <simdjson.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/daemon/job_base.hpp"
#include "jobs/workflow/merge_queue.hpp"

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;
using simdjson::dom::element;

namespace {

Expected<std::string> field(element doc, std::string_view pointer, std::string_view event) {
    std::string_view value;
    if (doc.at_pointer(pointer).get(value) != simdjson::SUCCESS)
        return fail(ErrorKind::invalid_input, "webhook " + std::string(event) + ": field " +
                                                  std::string(pointer) + " is missing");
    return std::string(value);
}

// The string at `pointer`, or empty (absent, null, another type).
std::string optional_text(element doc, std::string_view pointer) {
    std::string_view value;
    if (doc.at_pointer(pointer).get(value) != simdjson::SUCCESS) return {};
    return std::string(value);
}

std::string payload_with(const JobBase& base,
                         nlohmann::ordered_json payload = nlohmann::ordered_json::object()) {
    record_base(payload, base);
    return payload.dump();
}

WebhookAction ignore(std::string reason) {
    WebhookAction action;
    action.reason = std::move(reason);
    return action;
}

Expected<WebhookAction> pull_request(element doc, std::string_view action,
                                     const WebhookFilter& filter, JobSpec spec) {
    if (action != "opened" && action != "synchronize" && action != "reopened")
        return ignore("pull_request " + std::string(action) + " is not handled");
    element pr;
    if (doc["pull_request"].get(pr) != simdjson::SUCCESS)
        return fail(ErrorKind::invalid_input,
                    "webhook pull_request: field pull_request is missing");
    if (filter.pr_label && !has_label(pr, *filter.pr_label))
        return ignore("pull request without the label " + *filter.pr_label);
    auto sha = field(doc, "/pull_request/head/sha", "pull_request");
    std::int64_t number = 0;
    if (!sha) return std::unexpected(sha.error());
    if (pr["number"].get(number) != simdjson::SUCCESS)
        return fail(ErrorKind::invalid_input, "webhook pull_request: field number is missing");
    spec.key.sha = *sha;
    spec.ref = "refs/pull/" + std::to_string(number) + "/head";
    spec.event = "pull_request";
    nlohmann::ordered_json payload;
    payload["pull_request"] = number;
    // The base, for the gate's paths and branches filters (agent/daemon/job_base.hpp).
    spec.payload_json = payload_with({optional_text(doc, "/pull_request/base/sha"),
                                      optional_text(doc, "/pull_request/base/ref")},
                                     std::move(payload));
    return WebhookAction{WebhookVerb::submit, std::move(spec), ""};
}

Expected<WebhookAction> merge_group(element doc, std::string_view action, JobSpec spec) {
    auto sha = field(doc, "/merge_group/head_sha", "merge_group");
    if (!sha) return std::unexpected(sha.error());
    spec.key.sha = *sha;
    if (action == "destroyed") {
        std::string_view why;
        if (doc["reason"].get(why) != simdjson::SUCCESS) why = "destroyed";
        return WebhookAction{WebhookVerb::cancel, std::move(spec),
                             "merge group destroyed (" + std::string(why) + ")"};
    }
    if (action != "checks_requested")
        return ignore("merge_group " + std::string(action) + " is not handled");
    auto ref = field(doc, "/merge_group/head_ref", "merge_group");
    if (!ref) return std::unexpected(ref.error());
    spec.ref = *ref;
    spec.event = "merge_group";
    // The commit the group is stacked on and its branch; the head ref names both too.
    JobBase base{optional_text(doc, "/merge_group/base_sha"),
                 optional_text(doc, "/merge_group/base_ref")};
    const JobBase named = merge_queue_base(*ref);
    if (!jobs::is_commit_sha(base.sha)) base.sha = named.sha;
    if (base.ref.empty()) base.ref = named.ref;
    spec.payload_json = payload_with(base);
    return WebhookAction{WebhookVerb::submit, std::move(spec), ""};
}

Expected<WebhookAction> checks(element doc, std::string_view event, std::string_view action,
                               JobSpec spec) {
    const bool suite = event == "check_suite";
    const bool handled =
        suite ? (action == "requested" || action == "rerequested") : action == "rerequested";
    if (!handled) return ignore(std::string(event) + " " + std::string(action) + " is not handled");
    auto sha = field(doc, suite ? "/check_suite/head_sha" : "/check_run/head_sha", event);
    if (!sha) return std::unexpected(sha.error());
    spec.key.sha = *sha;
    std::string_view branch;
    if (suite && doc.at_pointer("/check_suite/head_branch").get(branch) == simdjson::SUCCESS)
        spec.ref = "refs/heads/" + std::string(branch);
    spec.event = "push";
    // The push's `before`, for the gate's paths filters (a check run's suite carries it too).
    const char* before = suite ? "/check_suite/before" : "/check_run/check_suite/before";
    spec.payload_json = payload_with({optional_text(doc, before), ""});
    const auto verb = action == "rerequested" ? WebhookVerb::rerun : WebhookVerb::submit;
    return WebhookAction{verb, std::move(spec), ""};
}

// A push to a branch or a tag: `after` at `ref`, its base `before` (40 zeros for a new branch).
// A deletion runs nothing. A repository webhook gets pushes this way; a GitHub App may get the
// same push as a check suite too, deduplicated on the job's key.
Expected<WebhookAction> push(element doc, JobSpec spec) {
    auto ref = field(doc, "/ref", "push");
    if (!ref) return std::unexpected(ref.error());
    auto after = field(doc, "/after", "push");
    if (!after) return std::unexpected(after.error());
    bool deleted = false;
    if (doc["deleted"].get(deleted) != simdjson::SUCCESS) deleted = false;
    if (deleted || *after == std::string(40, '0')) return ignore("push deleting " + *ref);
    if (!ref->starts_with("refs/heads/") && !ref->starts_with("refs/tags/"))
        return ignore("push to " + *ref + " is not handled (branches and tags only)");
    if (!jobs::is_commit_sha(*after))
        return fail(ErrorKind::invalid_input, "webhook push: field /after is not a commit SHA");
    spec.key.sha = *after;
    spec.ref = *ref;
    spec.event = "push";
    spec.payload_json = payload_with({optional_text(doc, "/before"), ""});
    return WebhookAction{WebhookVerb::submit, std::move(spec), ""};
}

}  // namespace

bool has_label(element pull_request, const std::string& label) {
    simdjson::dom::array labels;
    if (pull_request["labels"].get(labels) != simdjson::SUCCESS) return false;
    for (element item : labels) {
        std::string_view name;
        if (item["name"].get(name) == simdjson::SUCCESS && name == label) return true;
    }
    return false;
}

Expected<WebhookAction> webhook_action(std::string_view event, std::string_view body,
                                       const WebhookFilter& filter) {
    static constexpr std::string_view k_handled[] = {"pull_request", "merge_group", "push",
                                                     "check_suite", "check_run"};
    if (std::find(std::begin(k_handled), std::end(k_handled), event) == std::end(k_handled))
        return ignore("event '" + std::string(event) + "' is not handled");
    simdjson::dom::parser parser;
    element doc;
    if (parser.parse(simdjson::padded_string(body)).get(doc) != simdjson::SUCCESS)
        return fail(ErrorKind::invalid_input,
                    "webhook " + std::string(event) + ": body is not JSON");
    std::string_view action;  // every handled event has one but push
    if (event != "push" && doc["action"].get(action) != simdjson::SUCCESS)
        return fail(ErrorKind::invalid_input,
                    "webhook " + std::string(event) + ": field action is missing");
    auto repository = field(doc, "/repository/full_name", event);
    if (!repository) return std::unexpected(repository.error());
    const auto& allowed = filter.repositories;
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), *repository) == allowed.end())
        return ignore("repository " + *repository + " is not configured");
    JobSpec spec;
    spec.key.repository = *repository;
    spec.source = "webhook";
    if (event == "pull_request") return pull_request(doc, action, filter, std::move(spec));
    if (event == "merge_group") return merge_group(doc, action, std::move(spec));
    if (event == "push") return push(doc, std::move(spec));
    return checks(doc, event, action, std::move(spec));
}

}  // namespace agent
