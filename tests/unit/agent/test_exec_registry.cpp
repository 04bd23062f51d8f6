// agent::ExecRegistry: exec ids, their cancel (requested / finished / unknown), the cause a
// cancelled exec reports, and the hang-up of a client's connection.
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include "agent/api/exec_registry.hpp"
#include "common/fd.hpp"

TEST_CASE("exec ids: chosen or generated, well-formed, never reused within a sandbox") {
    agent::ExecRegistry registry;
    auto chosen = registry.begin("sb-1", "step.1_a-B");
    REQUIRE(chosen);
    CHECK(chosen->exec_id() == "step.1_a-B");
    auto generated = registry.begin("sb-2", "");
    REQUIRE(generated);
    CHECK(generated->exec_id().starts_with("ex-"));
    CHECK(generated->exec_id().size() == 19);
    CHECK(agent::valid_exec_id(generated->exec_id()));
    for (const char* bad : {"", "a/b", "a b", "../x", "é"}) CHECK_FALSE(agent::valid_exec_id(bad));
    CHECK_FALSE(agent::valid_exec_id(std::string(65, 'a')));
    CHECK(agent::valid_exec_id(std::string(64, 'a')));
    auto malformed = registry.begin("sb-1", "a/b");
    REQUIRE_FALSE(malformed);
    CHECK(malformed.error().kind == common::ErrorKind::invalid_input);

    auto twice = registry.begin("sb-1", "step.1_a-B");  // running
    REQUIRE_FALSE(twice);
    CHECK(twice.error().message.find("already used") != std::string::npos);
    CHECK(registry.begin("sb-other", "step.1_a-B"));    // another sandbox may use the name
    { auto moved = std::move(*chosen); }                // finished
    CHECK_FALSE(registry.begin("sb-1", "step.1_a-B"));  // and still not reusable
}

TEST_CASE("a cancel fires the running exec's token; finished and unknown ids are told apart") {
    agent::ExecRegistry registry;
    CHECK(registry.cancel("sb", "nothing") == agent::ExecCancelOutcome::unknown);
    {
        auto exec = registry.begin("sb", "one");
        REQUIRE(exec);
        CHECK(registry.running("sb") == "one");
        CHECK_FALSE(registry.running("sb-other"));
        CHECK(exec->cause() == agent::ExecCancelCause::none);
        CHECK_FALSE(exec->token().cancelled());
        CHECK(registry.cancel("sb", "one") == agent::ExecCancelOutcome::requested);
        CHECK(exec->token().cancelled());
        CHECK(exec->cause() == agent::ExecCancelCause::api);
        CHECK(registry.cancel("sb-other", "one") == agent::ExecCancelOutcome::unknown);
    }
    CHECK_FALSE(registry.running("sb"));
    CHECK(registry.cancel("sb", "one") == agent::ExecCancelOutcome::finished);
    CHECK(agent::to_string(agent::ExecCancelOutcome::requested) == "cancel_requested");

    // Only the last k_finished_kept ids are remembered: an old one becomes unknown.
    for (std::size_t i = 0; i < agent::ExecRegistry::k_finished_kept; ++i)
        REQUIRE(registry.begin("sb", "n" + std::to_string(i)));
    CHECK(registry.cancel("sb", "one") == agent::ExecCancelOutcome::unknown);
    CHECK(registry.cancel("sb", "n0") == agent::ExecCancelOutcome::finished);
}

TEST_CASE("an exec whose client hangs up is cancelled, by client_hangup") {
    int pair[2] = {-1, -1};
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
    common::Fd server(pair[0]);
    common::Fd client(pair[1]);
    agent::ExecRegistry registry;
    auto exec = registry.begin("sb", "", server.get());
    REQUIRE(exec);
    CHECK_FALSE(exec->token().cancelled());
    client.reset();
    CHECK(exec->token().cancelled());
    CHECK(exec->cause() == agent::ExecCancelCause::client_hangup);
    CHECK(agent::to_string(exec->cause()) == "client_hangup");
}
