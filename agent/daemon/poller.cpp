#include "agent/daemon/poller.hpp"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "agent/daemon/job_base.hpp"
#include "agent/daemon/webhook_events.hpp"
#include "jobs/workflow/merge_queue.hpp"

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;
using simdjson::dom::element;

namespace {

std::string text_at(element item, std::string_view pointer) {
    std::string_view value;
    if (item.at_pointer(pointer).get(value) != simdjson::SUCCESS) return "";
    return std::string(value);
}

Expected<simdjson::dom::array> parse_array(simdjson::dom::parser& parser,
                                           const github::Response& response,
                                           const std::string& path) {
    element root;
    simdjson::dom::array items;
    if (parser.parse(response.body).get(root) != simdjson::SUCCESS ||
        root.get_array().get(items) != simdjson::SUCCESS)
        return fail(ErrorKind::permanent, "GET " + path + ": the answer is not a JSON array");
    return items;
}

}  // namespace

std::optional<std::string> next_link(const github::Response& response, const std::string& api_url) {
    const auto link = response.header("link");
    if (!link) return std::nullopt;
    // <URL>; rel="next", <URL>; rel="last"
    std::string_view rest = *link;
    while (!rest.empty()) {
        const auto open = rest.find('<');
        const auto close = rest.find('>', open);
        if (open == std::string_view::npos || close == std::string_view::npos) return std::nullopt;
        const std::string_view url = rest.substr(open + 1, close - open - 1);
        const auto comma = rest.find(',', close);
        const std::string_view params = rest.substr(close + 1, comma - close - 1);
        if (params.find("rel=\"next\"") != std::string_view::npos) {
            if (!url.starts_with(api_url)) return std::nullopt;  // never follow off the API
            std::string path(url.substr(api_url.size()));
            if (!path.starts_with('/')) return std::nullopt;
            return path;
        }
        if (comma == std::string_view::npos) return std::nullopt;
        rest.remove_prefix(comma + 1);
    }
    return std::nullopt;
}

Poller::Poller(github::HttpClient client, JobQueue& queue, PollerOptions options)
    : m_client(std::move(client)),
      m_queue(queue),
      m_options(std::move(options)),
      m_own_state(std::make_unique<MemoryPollState>()),
      m_state(m_own_state.get()) {}

Poller::Poller(github::HttpClient client, JobQueue& queue, PollState& state, PollerOptions options)
    : m_client(std::move(client)), m_queue(queue), m_options(std::move(options)), m_state(&state) {}

PollStats Poller::poll_once() {
    PollStats stats;
    for (const auto& repository : m_options.repositories) {
        auto turn = m_state->take_turn(repository, m_options.interval);
        if (!turn) {
            stats.errors.push_back(repository + ": " + turn.error().message);
            spdlog::warn("poll {}: {}", repository, turn.error().message);
            continue;
        }
        if (!*turn) {
            ++stats.skipped;
            spdlog::debug("poll {}: polled by another agent of the pool", repository);
            continue;
        }
        for (auto step : {&Poller::poll_queue_branches, &Poller::poll_pulls}) {
            if (auto ok = (this->*step)(repository, stats); !ok) {
                stats.errors.push_back(repository + ": " + ok.error().message);
                spdlog::warn("poll {}: {}", repository, ok.error().message);
            }
        }
    }
    return stats;
}

Expected<std::optional<github::Response>> Poller::fetch(const std::string& path,
                                                        const std::optional<PolledPage>& known,
                                                        PollStats& stats) {
    auto response = m_client.get_if_none_match(path, known ? known->etag : "");
    ++stats.requests;
    if (!response) return std::unexpected(response.error());
    if (response->status == 304) {
        ++stats.not_modified;
        return std::optional<github::Response>();
    }
    return std::optional<github::Response>(std::move(*response));
}

Expected<void> Poller::submit(const JobSpec& spec, PollStats& stats) {
    auto submitted = SANDGATE_TRY(m_queue.submit(spec));
    if (submitted.outcome == SubmitOutcome::duplicate) {
        ++stats.duplicates;
        return {};
    }
    ++stats.submitted;
    spdlog::info("poll {}: job {} queued ({} {} {})", spec.key.repository, submitted.job.id,
                 spec.event, spec.ref, spec.key.sha);
    return {};
}

Expected<void> Poller::poll_queue_branches(const std::string& repository, PollStats& stats) {
    const std::string path = "/repos/" + repository + "/git/matching-refs/heads/gh-readonly-queue/";
    const auto known = SANDGATE_TRY(m_state->page(path));
    auto response = SANDGATE_TRY(fetch(path, known, stats));
    if (!response) return {};
    simdjson::dom::parser parser;
    auto refs = SANDGATE_TRY(parse_array(parser, *response, path));
    std::set<std::string> heads;
    for (element item : refs) {
        JobSpec spec;
        spec.key = {repository, text_at(item, "/object/sha"), "", 1};
        spec.ref = text_at(item, "/ref");
        spec.event = "merge_group";
        spec.source = "poll";
        if (!spec.ref.starts_with(jobs::k_merge_queue_prefix) || !jobs::is_commit_sha(spec.key.sha))
            return fail(ErrorKind::permanent, "GET " + path + ": a ref lacks ref/object.sha");
        nlohmann::ordered_json payload = nlohmann::ordered_json::object();
        record_base(payload, merge_queue_base(spec.ref));  // the group's base, as its ref names it
        spec.payload_json = payload.dump();
        if (auto ok = submit(spec, stats); !ok) return ok;
        heads.insert(spec.key.sha);
    }
    auto seen = SANDGATE_TRY(m_state->branches(repository));
    for (const auto& gone : seen) {
        if (heads.contains(gone)) continue;
        auto cancelled =
            SANDGATE_TRY(m_queue.cancel_matching(repository, gone,
                                                 "the merge-queue branch is gone (merged or "
                                                 "the group was destroyed)"));
        stats.cancelled += cancelled.size();
    }
    if (auto ok = m_state->set_branches(repository, heads); !ok) return ok;
    return m_state->set_page(path, {(response)->header("etag").value_or(""), std::nullopt});
}

Expected<void> Poller::poll_pulls(const std::string& repository, PollStats& stats) {
    std::optional<std::string> path = "/repos/" + repository + "/pulls?state=open&per_page=100";
    for (int page = 0; path && page < k_poll_max_pages; ++page) {
        const auto known = SANDGATE_TRY(m_state->page(*path));
        auto response = SANDGATE_TRY(fetch(*path, known, stats));
        if (!response) {
            path = known ? (known)->next : std::nullopt;  // a 304 answers a page we know
            continue;
        }
        simdjson::dom::parser parser;
        auto pulls = SANDGATE_TRY(parse_array(parser, *response, *path));
        for (element pull : pulls) {
            std::int64_t number = 0;
            JobSpec spec;
            spec.key = {repository, text_at(pull, "/head/sha"), "", 1};
            if (pull["number"].get(number) != simdjson::SUCCESS ||
                !jobs::is_commit_sha(spec.key.sha))
                return fail(ErrorKind::permanent,
                            "GET " + *path + ": a pull request lacks number/head.sha");
            if (m_options.pr_label && !has_label(pull, *m_options.pr_label)) continue;
            spec.ref = "refs/pull/" + std::to_string(number) + "/head";
            spec.event = "pull_request";
            spec.source = "poll";
            nlohmann::ordered_json payload;
            payload["pull_request"] = number;
            record_base(payload, {text_at(pull, "/base/sha"),
                                  text_at(pull, "/base/ref")});  // the gate's filters
            spec.payload_json = payload.dump();
            if (auto ok = submit(spec, stats); !ok) return ok;
        }
        auto next = next_link(*response, m_client.api_url());
        if (auto ok = m_state->set_page(*path, {(response)->header("etag").value_or(""), next});
            !ok)
            return ok;
        path = std::move(next);
    }
    return {};
}

}  // namespace agent
