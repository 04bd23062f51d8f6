#include <elf.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "agent/daemon/agent_config.hpp"
#include "agent/daemon/daemon.hpp"
#include "agent/store/job_store.hpp"
#include "jobs/git/git_url.hpp"
#include "sandbox/process/run.hpp"
#include "tests/fake_github/check_runs.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/helpers/mirror_attack.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

using namespace std::chrono_literals;

using namespace tests::agent_fixture;

namespace {

constexpr const char* k_sha = "0123456789abcdef0123456789abcdef01234567";

// The DT_NEEDED entries of a 64-bit ELF executable: its PT_DYNAMIC segment's entries, the
// names found in DT_STRTAB (a virtual address, mapped to the file through the PT_LOAD that
// holds it).
std::vector<std::string> needed_libraries(const std::filesystem::path& path) {
    const std::string image = tests::read_file(path);
    Elf64_Ehdr header{};
    REQUIRE(image.size() >= sizeof(header));
    std::memcpy(&header, image.data(), sizeof(header));
    REQUIRE(std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0);
    REQUIRE(header.e_ident[EI_CLASS] == ELFCLASS64);
    std::vector<Elf64_Phdr> segments(header.e_phnum);
    REQUIRE(header.e_phoff + segments.size() * sizeof(Elf64_Phdr) <= image.size());
    std::memcpy(segments.data(), image.data() + header.e_phoff,
                segments.size() * sizeof(Elf64_Phdr));
    std::vector<Elf64_Dyn> entries;
    for (const auto& segment : segments) {
        if (segment.p_type != PT_DYNAMIC) continue;
        REQUIRE(segment.p_offset + segment.p_filesz <= image.size());
        entries.resize(segment.p_filesz / sizeof(Elf64_Dyn));
        std::memcpy(entries.data(), image.data() + segment.p_offset,
                    entries.size() * sizeof(Elf64_Dyn));
    }
    std::uint64_t strtab = 0;
    for (const auto& entry : entries)
        if (entry.d_tag == DT_STRTAB) strtab = entry.d_un.d_ptr;
    std::uint64_t strtab_offset = 0;
    for (const auto& segment : segments)
        if (segment.p_type == PT_LOAD && strtab >= segment.p_vaddr &&
            strtab < segment.p_vaddr + segment.p_filesz)
            strtab_offset = strtab - segment.p_vaddr + segment.p_offset;
    REQUIRE(strtab_offset != 0);
    std::vector<std::string> names;
    for (const auto& entry : entries) {
        if (entry.d_tag != DT_NEEDED) continue;
        REQUIRE(strtab_offset + entry.d_un.d_val < image.size());
        names.emplace_back(image.c_str() + strtab_offset + entry.d_un.d_val);
    }
    return names;
}

}  // namespace

TEST_CASE("sandgate-agent, the daemon, loads no libcurl, libgit2, libcrypto, libssl or libpq") {
    const auto binary = std::filesystem::path(SANDGATE_BINARY).parent_path() / "sandgate-agent";
    const auto needed = needed_libraries(binary);
    std::string listed;
    for (const auto& name : needed) listed += name + " ";
    INFO(binary.string() << " needs: " << listed);
    // The parse is right: the daemon's queue is SQLite, and sandgate-full does need libcurl.
    CHECK(listed.find("libsqlite3.so") != std::string::npos);
    const auto full =
        needed_libraries(std::filesystem::path(SANDGATE_BINARY).parent_path() / "sandgate-full");
    CHECK(std::any_of(full.begin(), full.end(),
                      [](const auto& name) { return name.starts_with("libcurl"); }));
    for (const auto& name : needed)
        for (const char* heavy :
             {"libcurl", "libgit2", "libcrypto", "libssl", "libpq"})  // libpq: dlopen'ed by pools
            CHECK_FALSE(name.starts_with(heavy));
}

TEST_CASE("sandgate-agent without sandgate-full beside it refuses to start, touching nothing") {
    // Jobs and GitHub rounds run in sandgate-full; the daemon alone could run neither.
    const auto dir = tests::make_temp_dir("lone-agent");
    const auto lone = dir / "sandgate-agent";
    std::filesystem::copy_file(
        std::filesystem::path(SANDGATE_BINARY).parent_path() / "sandgate-agent", lone);
    tests::write_file(dir / "agent.yaml",
                      "agent:\n  state_dir: " + (dir / "state").string() + "\n");
    sandbox::RunRequest request;
    request.argv = {lone.string(), "agent", "--config", (dir / "agent.yaml").string()};
    request.cwd = dir;
    request.policy.mode = sandbox::SandboxMode::off;
    const auto result = sandbox::run(request);
    const std::string log = result.out.head + result.err.head;  // spdlog's sink: either stream
    INFO(log);
    CHECK(result.exit_code == 1);
    CHECK(log.find((dir / "sandgate-full").string() + " is missing") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "state"));  // no queue, no sandbox dir, no socket
}

TEST_CASE("the agent configuration: defaults, init, and errors naming file:line") {
    auto dir = tests::make_temp_dir("config");
    Agent scratch;
    const auto written = dir / "init.yaml";
    auto init = spawn({SANDGATE_BINARY, "agent", "init", written.string()}, dir);
    REQUIRE(init.wait() == 0);
    auto loaded = agent::load_agent_config(written);
    REQUIRE(loaded);
    CHECK(loaded->max_jobs == 2);
    CHECK(loaded->on_lost_job == agent::OnLostLease::conclude);
    CHECK(loaded->persistent_sandbox);  // a job pays the wrap's start-up once
    CHECK(tests::read_file(written).find("persistent_sandbox: true") != std::string::npos);
    auto again = spawn({SANDGATE_BINARY, "agent", "init", written.string()}, dir);
    CHECK(again.wait() != 0);  // never overwrites

    tests::write_file(dir / "bad.yaml", "agent:\n  max_jobs: 2\n  colour: blue\n");
    auto bad = agent::load_agent_config(dir / "bad.yaml");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == (dir / "bad.yaml").string() + ":3: agent.colour: unknown key");
    tests::write_file(dir / "zero.yaml", "agent:\n  max_jobs: 0\n");
    CHECK(agent::load_agent_config(dir / "zero.yaml").error().message.find(":2: agent.max_jobs") !=
          std::string::npos);
    tests::write_file(dir / "queue.yaml", "queue:\n  url: mysql://db/gate\n");
    CHECK(agent::load_agent_config(dir / "queue.yaml").error().message ==
          (dir / "queue.yaml").string() +
              ":2: queue.url: must be a postgresql:// URL (leave queue.url "
              "out for the embedded SQLite queue)");
    tests::write_file(dir / "queue.yaml", "queue:\n  url: postgresql://gate:hunter2@db/gate\n");
    auto in_url = agent::load_agent_config(dir / "queue.yaml");
    CHECK(in_url.error().message.find(":2: queue.url: holds a password") != std::string::npos);
    CHECK(in_url.error().message.find("hunter2") == std::string::npos);
    tests::write_file(dir / "queue.yaml",
                      "queue:\n  url: postgresql://gate@db/gate?password=hunter2\n");
    CHECK(agent::load_agent_config(dir / "queue.yaml").error().message.find("holds a password") !=
          std::string::npos);
    tests::write_file(dir / "queue.yaml", "queue:\n  password_file: /etc/pw\n");
    CHECK(agent::load_agent_config(dir / "queue.yaml")
              .error()
              .message.find("queue.password_file: only with queue.url") != std::string::npos);
    tests::write_file(dir / "queue.yaml",
                      "queue:\n  url: postgresql://gate@db.example.com:5433/gate\n");
    auto pool = agent::load_agent_config(dir / "queue.yaml");
    REQUIRE(pool);
    CHECK(pool->queue_url == "postgresql://gate@db.example.com:5433/gate");
    CHECK(loaded->queue_url.empty());  // the default: the embedded SQLite queue
    tests::write_file(dir / "tcp.yaml", "api:\n  listen: 127.0.0.1:9999\n");
    CHECK(agent::load_agent_config(dir / "tcp.yaml").error().message.find("token_file") !=
          std::string::npos);
    tests::write_file(dir / "secret", "value\n");
    std::filesystem::permissions(
        dir / "secret", std::filesystem::perms::owner_read | std::filesystem::perms::group_read);
    auto secret = agent::read_secret_file(dir / "secret");
    REQUIRE_FALSE(secret);
    CHECK(secret.error().message.find("value") == std::string::npos);
    std::filesystem::permissions(dir / "secret", std::filesystem::perms::owner_read);
    CHECK(agent::read_secret_file(dir / "secret") == "value");

    agent::AgentConfig config;
    config.state_dir = "/state";
    agent::Job job;
    job.spec.key = {"octo/repo", k_sha, "ci.yml/build", 1};
    job.spec.event = "merge_group";
    job.spec.ref = "refs/heads/gh-readonly-queue/main/pr-1";
    const auto argv = agent::job_argv(config, job, "/usr/bin/sandgate");
    CHECK(argv == std::vector<std::string>{"/usr/bin/sandgate",
                                           "gate",
                                           "--repo",
                                           "https://github.com/octo/repo",
                                           "--sha",
                                           k_sha,
                                           "--event",
                                           "merge_group",
                                           "--state-dir",
                                           "/state",
                                           "--sandbox",
                                           "bwrap",
                                           "--network",
                                           "none",
                                           "--report",
                                           "/state/agent/reports/0.json",
                                           "--ref",
                                           "refs/heads/gh-readonly-queue/main/pr-1",
                                           "-j",
                                           "ci.yml/build"});
    // A pull request's recorded base SHA becomes --base-sha (paths filters); a bad one is dropped.
    job.spec.event = "pull_request";
    job.spec.ref = "refs/pull/1/head";
    job.spec.key.workflow_job.clear();
    const std::string base(40, 'b');
    job.spec.payload_json = R"({"pull_request":1,"base_sha":")" + base + R"("})";
    const auto pr_argv = agent::job_argv(config, job, "/usr/bin/sandgate");
    REQUIRE(pr_argv.size() >= 2);
    CHECK(pr_argv[pr_argv.size() - 2] == "--base-sha");
    CHECK(pr_argv.back() == base);
    job.spec.payload_json = R"({"pull_request":1,"base_sha":"nope"})";
    const auto no_base = agent::job_argv(config, job, "/usr/bin/sandgate");
    CHECK(std::ranges::find(no_base, "--base-sha") == no_base.end());

    // Every event's recorded base SHA goes to the gate; the base branch for pull requests and
    // merge groups only (one argument: a branch is never read as a flag).
    const auto tail = [&](const std::string& event, const std::string& payload) {
        job.spec.event = event;
        job.spec.payload_json = payload;
        const auto made = agent::job_argv(config, job, "/usr/bin/sandgate");
        const auto report = std::ranges::find(made, "--report");
        return std::vector<std::string>(report + 4, made.end());  // after --report FILE --ref REF
    };
    const std::string both = R"({"base_sha":")" + base + R"(","base_ref":"main"})";
    CHECK(tail("pull_request", both) ==
          std::vector<std::string>{"--base-sha", base, "--base-ref=main"});
    CHECK(tail("merge_group", both) ==
          std::vector<std::string>{"--base-sha", base, "--base-ref=main"});
    CHECK(tail("push", both) == std::vector<std::string>{"--base-sha", base});
    CHECK(tail("api", R"({"base_sha":")" + std::string(40, '0') + R"("})") ==
          std::vector<std::string>{"--base-sha", std::string(40, '0')});
    CHECK(tail("merge_group", R"({"base_ref":"-x"})") == std::vector<std::string>{"--base-ref=-x"});
    CHECK(tail("push", "{}").empty());
    job.spec.payload_json = both;
    const auto env = agent::job_environment(config, job);
    CHECK(std::ranges::find(env, std::pair<std::string, std::string>{"SANDGATE_JOB_BASE_SHA",
                                                                     base}) != env.end());
    CHECK(std::ranges::find(env, std::pair<std::string, std::string>{"SANDGATE_JOB_BASE_REF",
                                                                     "main"}) != env.end());
}

TEST_CASE(
    "job.network: allowlist: job.allow_egress and its ranges go to the job's argv; bad values are "
    "one line naming the field, exit 3") {
    auto dir = tests::make_temp_dir("config");
    const auto file = dir / "egress.yaml";
    const auto load = [&](const std::string& section) {
        tests::write_file(file, "job:\n" + section);
        return agent::load_agent_config(file);
    };
    auto good = load(
        "  network: allowlist\n  allow_egress: [\"registry.npmjs.org\", \"*.example.org:8443\", "
        "\"@crates\"]\n  allow_egress_ranges: [203.0.113.0/24]\n");
    REQUIRE(good);
    CHECK(agent::job_network(*good) == "allowlist");
    CHECK(good->network == sandbox::NetworkMode::none);
    agent::Job job;
    job.spec.key = {"octo/repo", k_sha, "", 1};
    job.spec.event = "push";
    const auto argv = agent::job_argv(*good, job, "/usr/bin/sandgate");
    const auto network = std::ranges::find(argv, "--network");
    REQUIRE(network != argv.end());
    CHECK(std::vector<std::string>(network, network + 10) ==
          std::vector<std::string>{"--network", "allowlist", "--allow-egress", "registry.npmjs.org",
                                   "--allow-egress", "*.example.org:8443", "--allow-egress",
                                   "@crates", "--allow-egress-range", "203.0.113.0/24"});
    CHECK(network[10] == "--report");
    CHECK(agent::job_network(agent::AgentConfig{}) == "none");

    const auto message = [&](const std::string& section) {
        auto loaded = load(section);
        REQUIRE_FALSE(loaded);
        return loaded.error().message;
    };
    const std::string at = file.string() + ":";
    CHECK(message("  network: allowlist\n") ==
          at + "2: job.network: allowlist needs job.allow_egress (the hosts a step may reach)");
    CHECK(message("  allow_egress: [crates.io]\n") ==
          at + "2: job.allow_egress: only with job.network: allowlist");
    CHECK(message("  network: host\n  allow_egress_ranges: [10.0.0.0/8]\n") ==
          at + "3: job.allow_egress_ranges: only with job.network: allowlist");
    CHECK(message("  network: allowlist\n  sandbox: off\n  allow_egress: [crates.io]\n") ==
          at + "2: job.network: allowlist needs job.sandbox: bwrap (which enforces it)");
    CHECK(message("  network: allowlist\n  allow_egress:\n    - crates.io\n    - crates.io:0\n")
              .starts_with(at + "5: job.allow_egress: --allow-egress 'crates.io:0': "));
    CHECK(message("  network: allowlist\n  allow_egress: [10.0.0.1]\n")
              .starts_with(at + "3: job.allow_egress: --allow-egress '10.0.0.1': "));
    CHECK(message("  network: allowlist\n  allow_egress: [\"@nope\"]\n")
              .starts_with(at + "3: job.allow_egress: "));
    CHECK(message("  network: allowlist\n  allow_egress: [a.org]\n  allow_egress_ranges: [nope]\n")
              .starts_with(at + "4: job.allow_egress_ranges: --allow-egress-range 'nope'"));
    CHECK(message("  network: allowlist\n  allow_egress: a.org\n") ==
          at + "3: job.allow_egress: not a valid value");
    CHECK(message("  network: everything\n") == at + "2: job.network: none, allowlist or host");

    // The daemon refuses such a file with its one line and exit 3, starting nothing.
    tests::write_file(file, "agent:\n  state_dir: " + (dir / "state").string() +
                                "\njob:\n  network: allowlist\n  allow_egress: [\"[::1]\"]\n");
    const auto log = dir / "agent.log";
    auto daemon = spawn({SANDGATE_BINARY, "agent", "--config", file.string()}, dir, {}, log);
    CHECK(daemon.wait() == 3);
    const auto said = tests::read_file(log);
    CHECK(said.find(at + "5: job.allow_egress: --allow-egress '[::1]'") != std::string::npos);
    CHECK(std::count(said.begin(), said.end(), '\n') == 1);
    CHECK_FALSE(std::filesystem::exists(dir / "state"));
}

TEST_CASE("the agent runs at most max_jobs at once, logs each, and concludes them") {
    Agent agent;
    auto daemon = agent.start();
    agent.wait_ready();
    std::vector<std::int64_t> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(agent.submit(sha(i)));
    agent.wait_file("started-" + std::to_string(ids[0]));
    agent.wait_file("started-" + std::to_string(ids[1]));
    auto queue = agent.queue();
    CHECK(*queue->count(agent::JobState::running) == 2);
    CHECK(*queue->count(agent::JobState::queued) == 2);  // the limit holds
    CHECK_FALSE(std::filesystem::exists(agent.marks / ("started-" + std::to_string(ids[2]))));
    tests::write_file(agent.marks / "release", "0");
    for (auto id : ids) CHECK(agent.wait_terminal(id) == agent::JobState::succeeded);
    const auto log = tests::read_file(agent.dir / "state" / "agent" / "logs" /
                                      (std::to_string(ids[3]) + ".log"));
    CHECK(log == "job " + std::to_string(ids[3]) + " of octo/repo at " + sha(3) + "\n");
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE("a cancel through the CLI stops a running job; a failing job is failed") {
    Agent agent;
    auto daemon = agent.start();
    agent.wait_ready();
    const auto id = agent.submit(sha(1));
    agent.wait_file("started-" + std::to_string(id));
    REQUIRE(agent.jobs({"cancel", std::to_string(id)}) == 0);
    CHECK(agent.wait_terminal(id) == agent::JobState::cancelled);
    CHECK_FALSE(std::filesystem::exists(agent.marks / ("finished-" + std::to_string(id))));
    tests::write_file(agent.marks / "release", "1");
    const auto failing = agent.submit(sha(2));
    CHECK(agent.wait_terminal(failing) == agent::JobState::failed);
    CHECK(agent.jobs({"get", "999"}) != 0);
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE("kill -9 mid-job: the restarted agent concludes the job, or re-runs it") {
    for (const char* policy : {"conclude", "requeue"}) {
        Agent agent(std::string("  on_lost_job: ") + policy + "\n");
        auto first = agent.start();
        agent.wait_ready();
        const auto id = agent.submit(sha(7));
        agent.wait_file("started-" + std::to_string(id));
        ::kill(first.pid, SIGKILL);
        first.wait();
        tests::write_file(agent.marks / "release", "0");
        auto second = agent.start();
        const auto state = agent.wait_terminal(id);
        if (std::string(policy) == "conclude") {
            CHECK(state == agent::JobState::failed);
            CHECK((*agent.queue()->get(id))->reason.find("test-agent") != std::string::npos);
        } else {
            CHECK(state == agent::JobState::succeeded);
            CHECK((*agent.queue()->get(id))->claims == 2);
        }
        ::kill(second.pid, SIGTERM);
        CHECK(second.wait() == 0);
    }
}

TEST_CASE("SIGTERM drains: running jobs finish, or are cancelled at the deadline") {
    {
        Agent agent;
        auto daemon = agent.start();
        agent.wait_ready();
        const auto id = agent.submit(sha(1));
        agent.wait_file("started-" + std::to_string(id));
        ::kill(daemon.pid, SIGTERM);
        const auto queued = agent.submit(sha(2));  // the API still answers while draining
        tests::write_file(agent.marks / "release", "0");
        CHECK(daemon.wait() == 0);
        auto queue = agent.queue();
        CHECK((*queue->get(id))->state == agent::JobState::succeeded);
        CHECK((*queue->get(queued))->state == agent::JobState::queued);  // not claimed
    }
    {
        Agent agent("  drain_seconds: 1\n");
        auto daemon = agent.start();
        agent.wait_ready();
        const auto id = agent.submit(sha(3));
        agent.wait_file("started-" + std::to_string(id));
        ::kill(daemon.pid, SIGTERM);
        CHECK(daemon.wait() == 0);
        CHECK((*agent.queue()->get(id))->state == agent::JobState::cancelled);
    }
}

namespace {

// The github: section of an agent that reports to the stand-in.
std::string reporting_to(const tests::FakeGitHub& server, const std::filesystem::path& dir) {
    tests::write_file(dir / "github-token", std::string(tests::k_fake_token) + "\n");
    std::filesystem::permissions(dir / "github-token", std::filesystem::perms::owner_read |
                                                           std::filesystem::perms::owner_write);
    return "github:\n  repositories: [octo/gate]\n  api_url: " + server.url() +
           "\n  token_file: " + (dir / "github-token").string() + "\n";
}

void wait_statuses(const tests::FakeGitHub& server, const std::vector<std::string>& expected) {
    while (tests::check_run_statuses(server) != expected) std::this_thread::sleep_for(50ms);
}

}  // namespace

TEST_CASE("SIGTERM drains with a report owed: the conclusion is sent before the agent exits") {
    tests::FakeGitHub server;
    Agent agent(reporting_to(server, tests::make_temp_dir("drain-github")));
    auto daemon = agent.start();
    agent.wait_ready();
    REQUIRE(agent.jobs({"submit", "--repo", "octo/gate", "--sha", sha(7)}) == 0);
    agent.wait_file("started-1");
    wait_statuses(server, {"in_progress"});
    ::kill(daemon.pid, SIGTERM);
    tests::write_file(agent.marks / "release", "0");
    CHECK(daemon.wait() == 0);
    CHECK(tests::check_run_statuses(server) ==
          std::vector<std::string>{"completed"});  // not left in progress
}

TEST_CASE(
    "SIGTERM drains: reports GitHub refuses until the deadline stay queued, with a log "
    "line, and go out after the next start") {
    tests::FakeGitHub server;
    Agent agent("  drain_seconds: 3\n" +
                reporting_to(server, tests::make_temp_dir("drain-github")));
    const auto log = agent.dir / "agent.log";
    auto daemon = agent.start(log);
    agent.wait_ready();
    REQUIRE(agent.jobs({"submit", "--repo", "octo/gate", "--sha", sha(8)}) == 0);
    agent.wait_file("started-1");
    wait_statuses(server, {"in_progress"});
    server.inject(R"([{"kind":"500","match":"check-runs","count":100000}])");
    ::kill(daemon.pid, SIGTERM);
    tests::write_file(agent.marks / "release", "0");
    CHECK(daemon.wait() == 0);
    const auto text = tests::read_file(log);
    INFO(text);
    CHECK(text.find("report(s) still owed to GitHub; they stay queued") != std::string::npos);
    CHECK(tests::check_run_statuses(server) == std::vector<std::string>{"in_progress"});
    CHECK((*agent.queue()->get(1))->state == agent::JobState::succeeded);

    server.post("/_control/faults", R"({"replace": true, "faults": []})");
    auto again = agent.start();
    wait_statuses(server, {"completed"});
    ::kill(again.pid, SIGTERM);
    CHECK(again.wait() == 0);
}

namespace {

constexpr const char* k_trivial_gate =
    "name: gate\non: merge_group\njobs:\n  check:\n    runs-on: ubuntu-latest\n"
    "    steps:\n      - run: echo checked\n";

// A bare copy of the repository at `work` as REMOTES/octo/<name>.git.
void publish(const std::filesystem::path& work, const std::filesystem::path& remotes,
             const std::string& name) {
    tests::sh("git clone -q --bare " + work.string() + " " +
              (remotes / "octo" / (name + ".git")).string());
}

// octo/app: its workflow runs git in its worktree and its submodule's (octo/lib, by the
// relative URL ../lib.git), then every read of octo/secret's mirror
// (tests/helpers/mirror_attack.hpp).
std::string make_app(const std::filesystem::path& root, const std::filesystem::path& state,
                     const std::string& secret_sha) {
    const auto remotes = root / "remotes";
    tests::make_repo(root / "lib", {{"lib.txt", "lib\n"}});
    publish(root / "lib", remotes, "lib");
    const auto secret_url = "file://" + (remotes / "octo/secret.git").string();
    const auto scope = state / "mirrors" / jobs::mirror_dir_name(*jobs::parse_remote(secret_url));
    REQUIRE(std::filesystem::is_directory(scope / "repo.git"));  // the secret job made it
    const std::string workflow =
        "name: gate\non: merge_group\njobs:\n  check:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/checkout@v4\n        with:\n          submodules: true\n"
        "      - run: git log --oneline | grep -q ' lib$' && test -z \"$(git status --porcelain)\" "
        "&& echo \"own\"\"-ok\"\n"
        "      - run: cd lib && git log --oneline | grep -q initial && test -z \"$(git status "
        "--porcelain)\" && echo \"sub\"\"-ok\"\n"
        "      - run: |\n" +
        tests::indent_lines(
            tests::mirror_attack_lines(state / "mirrors", scope, scope / "repo.git", secret_sha),
            10);
    tests::make_repo(root / "app", {{".github/workflows/gate.yml", workflow}});
    tests::sh("cd " + (root / "app").string() +
              " && git -c protocol.file.allow=always submodule -q add " +
              (remotes / "octo/lib.git").string() +
              " lib && git config -f .gitmodules submodule.lib.url ../lib.git && "
              "git add .gitmodules && git commit -qm lib");
    publish(root / "app", remotes, "app");
    return tests::sh("git -C " + (root / "app").string() + " rev-parse HEAD");
}

}  // namespace

TEST_CASE(
    "threat row 3: a job's sandbox binds its repository's mirrors, never another repository's") {
    SKIP_UNDER_WRAP("a nested bwrap cannot run inside the wrap: the job sandbox is off there");
    const auto root = tests::make_temp_dir("mirror-scope");
    std::filesystem::create_directories(root / "remotes/octo");
    Agent agent(
        "github:\n  clone_url: file://" + (root / "remotes").string() + "/{repository}.git\n",
        Agent::JobCommand::gate);
    const auto state = std::filesystem::canonical(agent.dir) / "state";
    const std::string secret_sha = tests::make_repo(
        root / "secret",
        {{".github/workflows/gate.yml", k_trivial_gate}, {"s.txt", "the secret repository\n"}});
    publish(root / "secret", root / "remotes", "secret");
    auto daemon = agent.start();
    agent.wait_ready();
    REQUIRE(agent.jobs({"submit", "--repo", "octo/secret", "--sha", secret_sha, "--event",
                        "merge_group"}) == 0);
    const auto secret_job = (*agent.queue()->list({})).at(0);
    REQUIRE(agent.wait_terminal(secret_job.id) == agent::JobState::succeeded);

    const std::string app_sha = make_app(root, state, secret_sha);
    REQUIRE(agent.jobs(
                {"submit", "--repo", "octo/app", "--sha", app_sha, "--event", "merge_group"}) == 0);
    agent::JobFilter filter;
    filter.sha = app_sha;
    const auto app_job = (*agent.queue()->list(filter)).at(0);
    const auto state_of_app = agent.wait_terminal(app_job.id);
    const auto log =
        tests::read_file(state / "agent" / "logs" / (std::to_string(app_job.id) + ".log"));
    INFO(log);
    CHECK(state_of_app == agent::JobState::succeeded);
    CHECK_THAT(log, Catch::Contains("own-ok") && Catch::Contains("sub-ok") &&
                        Catch::Contains("attack-done"));
    CHECK_THAT(log, !Catch::Contains("LEAK"));
    // The policy on the job's record binds app's scope, and nothing of the mirrors beside it.
    const auto app_scope = jobs::mirror_dir_name(
        *jobs::parse_remote("file://" + (root / "remotes/octo/app.git").string()));
    const std::string policy = (*agent.queue()->get(app_job.id))->policy_json;
    INFO(policy);
    CHECK_THAT(policy, Catch::Contains((state / "mirrors" / app_scope).string()));
    CHECK_THAT(policy, !Catch::Contains((state / "mirrors").string() + "\""));
    CHECK_THAT(policy, !Catch::Contains("secret-"));
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}

TEST_CASE(
    "a job's base reaches its gate: a push's paths filter and a merge group's base, through the "
    "API") {
    const auto root = tests::make_temp_dir("job-base");
    std::filesystem::create_directories(root / "remotes/octo");
    Agent agent(
        "github:\n  clone_url: file://" + (root / "remotes").string() + "/{repository}.git\n",
        Agent::JobCommand::gate);
    // src.yml fails wherever it runs; a push that changed only docs/ must not run it.
    const std::string base = tests::make_repo(
        root / "app",
        {{".github/workflows/always.yml",
          "on: [push, merge_group]\njobs:\n  always:\n    runs-on: ubuntu-latest\n"
          "    steps:\n      - run: echo always-ran\n"},
         {".github/workflows/src.yml",
          "on:\n  push:\n    paths: ['src/**']\njobs:\n  src:\n    runs-on: ubuntu-latest\n"
          "    steps:\n      - run: exit 1\n"},
         {".github/workflows/queue.yml",
          "on:\n  merge_group:\n    branches: [main]\njobs:\n  queue:\n    runs-on: ubuntu-latest\n"
          "    steps:\n      - run: test '${{ github.event.merge_group.base_sha }}' = '" +
              std::string(40, 'c') + "'\n"}});
    const std::string docs = tests::commit_file(root / "app", "docs/guide.md", "docs\n");
    publish(root / "app", root / "remotes", "app");
    auto daemon = agent.start();
    agent.wait_ready();
    const auto run = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"submit", "--repo", "octo/app", "--sha", docs});
        REQUIRE(agent.jobs(args) == 0);
        const auto job = (*agent.queue()->list({})).back();
        const auto state = agent.wait_terminal(job.id);
        return std::pair{state, tests::read_file(agent.dir / "state" / "agent" / "logs" /
                                                 (std::to_string(job.id) + ".log"))};
    };
    const auto [pushed, push_log] = run({"--ref", "refs/heads/main", "--base-sha", base});
    INFO(push_log);
    CHECK(pushed == agent::JobState::succeeded);
    CHECK_THAT(push_log, Catch::Contains("always-ran") && !Catch::Contains("warning"));
    // A merge group on main, stacked on a commit (as its base_sha) the workflow checks.
    const auto [grouped, group_log] =
        run({"--event", "merge_group", "--ref", "refs/heads/main", "--base-sha",
             std::string(40, 'c'), "--base-ref", "main", "--attempt", "2"});
    INFO(group_log);
    CHECK(grouped == agent::JobState::succeeded);
    // A malformed base is the API's 400: the client fails (1) and nothing is queued.
    CHECK(agent.jobs({"submit", "--repo", "octo/app", "--sha", base, "--base-sha", "HEAD~1"}) == 1);
    CHECK(agent.queue()->list({})->size() == 2);
    ::kill(daemon.pid, SIGTERM);
    CHECK(daemon.wait() == 0);
}
