// GitHub webhook deliveries turned into queue actions (agent/daemon/webhook_events.cpp), at the
// level of the function; the signed /webhook endpoint that calls it is tested in test_api.cpp.
#include <catch2/catch.hpp>
#include <string>

#include "agent/daemon/job_base.hpp"
#include "agent/daemon/webhook_events.hpp"

namespace {

const std::string k_after = "0123456789abcdef0123456789abcdef01234567";
const std::string k_before = "fedcba9876543210fedcba9876543210fedcba98";

std::string push_body(const std::string& ref, const std::string& after, bool deleted = false) {
    return R"({"ref":")" + ref + R"(","before":")" + k_before + R"(","after":")" + after +
           R"(","created":false,"deleted":)" + (deleted ? "true" : "false") +
           R"(,"forced":false,"repository":{"full_name":"octo/repo"},"pusher":{"name":"octocat"}})";
}

}  // namespace

TEST_CASE("a push to a branch or a tag is a push job at its after, based on its before") {
    for (const std::string ref : {"refs/heads/main", "refs/tags/v1.2.0"}) {
        auto action = agent::webhook_action("push", push_body(ref, k_after), {});
        REQUIRE(action);
        CHECK(action->verb == agent::WebhookVerb::submit);
        CHECK(action->spec.key.repository == "octo/repo");
        CHECK(action->spec.key.sha == k_after);
        CHECK(action->spec.ref == ref);
        CHECK(action->spec.event == "push");
        CHECK(action->spec.source == "webhook");
        CHECK(agent::recorded_base(action->spec).sha == k_before);
        CHECK(agent::base_arguments(action->spec) ==
              std::vector<std::string>{"--base-sha", k_before});
    }
}

TEST_CASE(
    "a push that deletes, or to another kind of ref, runs nothing; a malformed one is refused") {
    auto deleted =
        agent::webhook_action("push", push_body("refs/heads/old", std::string(40, '0'), true), {});
    REQUIRE(deleted);
    CHECK(deleted->verb == agent::WebhookVerb::ignore);
    CHECK(deleted->reason == "push deleting refs/heads/old");

    auto notes = agent::webhook_action("push", push_body("refs/notes/commits", k_after), {});
    REQUIRE(notes);
    CHECK(notes->verb == agent::WebhookVerb::ignore);
    CHECK(notes->reason.find("refs/notes/commits") != std::string::npos);

    auto other_repo = agent::webhook_action("push", push_body("refs/heads/main", k_after),
                                            {std::nullopt, {"octo/elsewhere"}});
    REQUIRE(other_repo);
    CHECK(other_repo->verb == agent::WebhookVerb::ignore);

    auto no_after = agent::webhook_action(
        "push", R"({"ref":"refs/heads/main","repository":{"full_name":"octo/repo"}})", {});
    REQUIRE_FALSE(no_after);
    CHECK(no_after.error().kind == common::ErrorKind::invalid_input);
    CHECK(no_after.error().message == "webhook push: field /after is missing");

    auto short_sha = agent::webhook_action("push", push_body("refs/heads/main", "abc123"), {});
    REQUIRE_FALSE(short_sha);
    CHECK(short_sha.error().message == "webhook push: field /after is not a commit SHA");
}

TEST_CASE("events other than push still need an action") {
    auto missing =
        agent::webhook_action("pull_request", R"({"repository":{"full_name":"octo/repo"}})", {});
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message == "webhook pull_request: field action is missing");
    auto unknown = agent::webhook_action("issues", R"({"action":"opened"})", {});
    REQUIRE(unknown);
    CHECK(unknown->verb == agent::WebhookVerb::ignore);
}
