#include "agent/job_base.hpp"

#include <simdjson.h>

namespace agent {

bool is_base_sha(std::string_view text) {
    return text.size() == 40 && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

JobBase merge_queue_base(std::string_view head_ref) {
    constexpr std::string_view prefix = "refs/heads/gh-readonly-queue/";
    if (!head_ref.starts_with(prefix)) return {};
    head_ref.remove_prefix(prefix.size());
    const std::size_t pr = head_ref.rfind("/pr-");
    if (pr == std::string_view::npos || pr == 0) return {};
    JobBase base;
    base.ref = "refs/heads/" + std::string(head_ref.substr(0, pr));
    // pr-N-SHA: the SHA after the last '-'.
    const std::string_view tail = head_ref.substr(pr + 4);
    if (const std::size_t dash = tail.rfind('-'); dash != std::string_view::npos && is_base_sha(tail.substr(dash + 1)))
        base.sha = std::string(tail.substr(dash + 1));
    return base;
}

void record_base(nlohmann::ordered_json& payload, const JobBase& base) {
    if (is_base_sha(base.sha)) payload["base_sha"] = base.sha;
    if (!base.ref.empty()) payload["base_ref"] = base.ref;
}

JobBase recorded_base(const JobSpec& spec) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    JobBase base;
    if (parser.parse(simdjson::padded_string(spec.payload_json)).get(doc) != simdjson::SUCCESS) return base;
    std::string_view text;
    if (doc["base_sha"].get(text) == simdjson::SUCCESS && is_base_sha(text)) base.sha = std::string(text);
    if (doc["base_ref"].get(text) == simdjson::SUCCESS) base.ref = std::string(text);
    return base;
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
