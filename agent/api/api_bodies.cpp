#include "agent/api/api_bodies.hpp"

#include <simdjson.h>

#include <algorithm>

#include "agent/daemon/job_base.hpp"
#include "jobs/workflow/merge_queue.hpp"

namespace agent {
namespace {

bool is_hex_sha_text(std::string_view sha) {
    return (sha.size() == 40 || sha.size() == 64) &&
           sha.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// A branch name as git would take it, and never an option: printable, no space, no leading '-'.
bool is_branch_name(std::string_view name) {
    if (name.empty() || name.size() > 255 || name.starts_with('-')) return false;
    return std::ranges::all_of(name, [](char c) { return c > ' ' && c != 0x7f; });
}

// The optional base of a submitted job (agent/daemon/job_base.hpp) into `base`; an error (a
// one-line message naming the field) when a field is there but malformed.
std::optional<std::string> read_base(simdjson::dom::element doc, JobBase& base) {
    simdjson::dom::element value;
    std::string_view text;
    if (doc["base_sha"].get(value) == simdjson::SUCCESS) {
        if (value.get(text) != simdjson::SUCCESS || !jobs::is_commit_sha(text))
            return "field base_sha: 40 lower-case hex digits are required (40 zeros: a new branch)";
        base.sha = std::string(text);
    }
    if (doc["base_ref"].get(value) == simdjson::SUCCESS) {
        if (value.get(text) != simdjson::SUCCESS || !is_branch_name(text))
            return "field base_ref: a branch name is required (no spaces, not starting with '-')";
        base.ref = std::string(text);
    }
    return std::nullopt;
}

}  // namespace

bool is_hex_sha(std::string_view sha) {
    return is_hex_sha_text(sha);
}

std::expected<JobSpec, std::string> read_job_submission(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(simdjson::padded_string(body)).get(doc) != simdjson::SUCCESS ||
        !doc.is_object())
        return std::unexpected("body: a JSON object is required");
    JobSpec spec;
    spec.source = "api";
    spec.event = "push";
    std::string_view text;
    if (doc["repository"].get(text) != simdjson::SUCCESS || text.empty())
        return std::unexpected("field repository: a non-empty string is required");
    spec.key.repository = std::string(text);
    if (doc["sha"].get(text) != simdjson::SUCCESS || !is_hex_sha(text))
        return std::unexpected("field sha: 40 (or 64) lower-case hex digits are required");
    spec.key.sha = std::string(text);
    for (auto [name, target] : {std::pair{"workflow_job", &spec.key.workflow_job},
                                std::pair{"ref", &spec.ref}, std::pair{"event", &spec.event}}) {
        simdjson::dom::element value;
        if (doc[name].get(value) != simdjson::SUCCESS) continue;
        if (value.get(text) != simdjson::SUCCESS)
            return std::unexpected(std::string("field ") + name + ": a string is required");
        *target = std::string(text);
    }
    if (spec.event != "push" && spec.event != "pull_request" && spec.event != "merge_group")
        return std::unexpected("field event: one of push, pull_request, merge_group");
    simdjson::dom::element attempt;
    if (doc["attempt"].get(attempt) == simdjson::SUCCESS &&
        (attempt.get(spec.key.attempt) != simdjson::SUCCESS || spec.key.attempt < 1))
        return std::unexpected("field attempt: an integer >= 1 is required");
    JobBase base;
    if (auto bad = read_base(doc, base)) return std::unexpected(*bad);
    nlohmann::ordered_json payload = nlohmann::ordered_json::object();
    record_base(payload, base);
    spec.payload_json = payload.dump();
    return spec;
}

}  // namespace agent
