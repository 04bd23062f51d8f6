#include "agent/daemon/job_base.hpp"

#include <simdjson.h>

#include "common/json_convert.hpp"
#include "jobs/workflow/merge_queue.hpp"

namespace agent {

JobBase merge_queue_base(std::string_view head_ref) {
    auto parsed = jobs::parse_merge_queue_ref(head_ref);
    return {.sha = std::move(parsed.base_sha), .ref = std::move(parsed.base_ref)};
}

void record_base(nlohmann::ordered_json& payload, const JobBase& base) {
    if (jobs::is_commit_sha(base.sha)) payload["base_sha"] = base.sha;
    if (!base.ref.empty()) payload["base_ref"] = base.ref;
}

JobBase recorded_base(const JobSpec& spec) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    JobBase base;
    if (parser.parse(simdjson::padded_string(spec.payload_json)).get(doc) != simdjson::SUCCESS)
        return base;
    std::string_view text;
    if (doc["base_sha"].get(text) == simdjson::SUCCESS && jobs::is_commit_sha(text))
        base.sha = std::string(text);
    if (doc["base_ref"].get(text) == simdjson::SUCCESS) base.ref = std::string(text);
    return base;
}

void inherit_base(JobSpec& rerun, const JobSpec& earlier) {
    if (rerun.event != earlier.event) return;
    JobBase base = recorded_base(rerun);
    if (!base.sha.empty() && !base.ref.empty()) return;
    const JobBase before = recorded_base(earlier);
    if (base.sha.empty()) base.sha = before.sha;
    if (base.ref.empty()) base.ref = before.ref;
    auto payload = common::to_ordered_json(rerun.payload_json);
    if (!payload || !payload->is_object()) return;  // not ours to rewrite
    record_base(*payload, base);
    rerun.payload_json = payload->dump();
}

std::vector<std::string> base_arguments(const JobSpec& spec) {
    const JobBase base = recorded_base(spec);
    std::vector<std::string> argv;
    if (!base.sha.empty()) argv.insert(argv.end(), {"--base-sha", base.sha});
    // One argument (--base-ref=REF): a branch from a webhook is never read as another flag.
    const bool has_branch = spec.event == "pull_request" || spec.event == "merge_group";
    if (has_branch && !base.ref.empty()) argv.push_back("--base-ref=" + base.ref);
    return argv;
}

}  // namespace agent
