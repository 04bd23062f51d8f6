// The agent's mirror upkeep (agent/daemon/mirror_upkeep.hpp): which scopes the configuration
// serves, running jobs' scopes kept, and the daemon collecting mirrors when it starts.
#include <signal.h>

#include <catch2/catch.hpp>
#include <memory>
#include <thread>

#include "agent/daemon/mirror_upkeep.hpp"
#include "jobs/git/git_url.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;
using namespace tests::agent_fixture;
namespace fs = std::filesystem;

namespace {

std::string scope_of(const agent::AgentConfig& config, const std::string& repository) {
    return *jobs::mirror_scope_name(agent::repository_url(config, repository));
}

}  // namespace

TEST_CASE("the configured repositories are served; running jobs' scopes are in use") {
    const auto dir = tests::make_temp_dir("upkeep");
    agent::AgentConfig config;
    config.state_dir = dir / "state";
    CHECK_FALSE(agent::served_mirror_scopes(config));  // none listed: any repository is served
    CHECK(agent::repository_url(config, "octo/app") == "https://github.com/octo/app");
    config.clone_url = "file://" + (dir / "remotes/{repository}.git").string();
    CHECK(agent::repository_url(config, "octo/app") ==
          "file://" + (dir / "remotes/octo/app.git").string());
    CHECK(agent::repository_url(config, "/srv/git/x.git") == "/srv/git/x.git");
    config.repositories = {"octo/app"};
    const auto served = agent::served_mirror_scopes(config);
    REQUIRE(served);
    CHECK(*served == std::set<std::string>{scope_of(config, "octo/app")});

    for (const auto* repository : {"octo/app", "octo/gone", "octo/busy"})
        fs::create_directories(config.state_dir / "mirrors" / scope_of(config, repository) /
                               "repo.git");
    auto upkeep = std::make_unique<agent::MirrorUpkeep>(config);
    auto report = upkeep->collect({"octo/busy"});
    CHECK_FALSE(fs::exists(config.state_dir / "mirrors" /
                           scope_of(config, "octo/gone")));  // renamed at once
    upkeep.reset();                                          // waits for the trash removal
    for (const auto& entry : fs::directory_iterator(config.state_dir / "mirrors"))
        CHECK_FALSE(entry.path().filename().string().starts_with("gc-trash."));
    REQUIRE(report.removed.size() == 1);
    CHECK(report.removed[0].name == scope_of(config, "octo/gone"));
    CHECK(report.removed[0].reason == jobs::MirrorGcReason::unserved);
    CHECK(report.kept == 2);
    CHECK(fs::exists(config.state_dir / "mirrors" / scope_of(config, "octo/busy")));
    CHECK(fs::exists(config.state_dir / "mirrors" / scope_of(config, "octo/app")));
}

TEST_CASE("the daemon collects mirrors when it starts") {
    Agent agent(
        "  mirror_idle_days: 3\ngithub:\n  repositories: [octo/app]\n"
        "  clone_url: file:///srv/git/{repository}.git\n");
    agent::AgentConfig config;
    config.clone_url = "file:///srv/git/{repository}.git";
    const auto mirrors = agent.dir / "state" / "mirrors";
    const auto kept = mirrors / scope_of(config, "octo/app") / "repo.git";
    const auto gone = mirrors / scope_of(config, "octo/gone") / "repo.git";
    fs::create_directories(kept);
    fs::create_directories(gone);
    auto loaded = agent::load_agent_config(agent.config);
    REQUIRE(loaded);
    CHECK(loaded->mirror_max_idle == std::chrono::hours(72));
    auto daemon = agent.start();
    agent.wait_ready();
    for (int i = 0; i < 6000 && fs::exists(gone); ++i) std::this_thread::sleep_for(20ms);
    CHECK_FALSE(fs::exists(gone.parent_path()));
    CHECK(fs::exists(kept));
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);

    tests::write_file(agent.dir / "bad.yaml", "agent:\n  mirror_idle_days: 0\n");
    auto bad = agent::load_agent_config(agent.dir / "bad.yaml");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find(":2: agent.mirror_idle_days: must be > 0") != std::string::npos);
    CHECK(agent::AgentConfig{}.mirror_max_idle == std::chrono::hours(14 * 24));
}
