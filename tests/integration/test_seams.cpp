// The seams around the wall (issue 20; ../shared/docs/sandbox-threats.md rows 19 and 33-40):
// what a step writes, the trusted side reaches only through sandbox/safe_access. Each case is a
// real attack a pull request's workflow would try, under `sandgate run`, `sandgate gate`,
// `sandgate exec` and the hook: a planted symlink, a FIFO, a 1 TiB sparse file, a swapped
// directory, at each path the trusted side touches; and the host identity, the keyring,
// /dev/shm and the toolchain cache under `sandgate exec`. Cases that need root say so (CI and
// this machine run as root); inside sandgate's own wrap (not root there) they skip with the
// marker.
#include <linux/keyctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/helpers/git_fixture.hpp"
#include "tests/support/gate_cli.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* k_secret = "HOST-SECRET-20";

// A host file and a host directory outside everything a step is given: a step can point a
// link at them by name, never reach them itself.
struct Host {
    fs::path dir;
    fs::path secret;  // a file holding k_secret
    fs::path target;  // an empty directory
};

Host host_side() {
    Host host;
    host.dir = tests::make_temp_dir("host");
    host.secret = host.dir / "api-token";
    host.target = host.dir / "profile.d";
    tests::write_file(host.secret, std::string("API_TOKEN=") + k_secret + "\n");
    fs::create_directory(host.target);
    return host;
}

std::string with(std::string text, const std::string& key, const std::string& value) {
    for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
        text.replace(at, key.size(), value);
    return text;
}

tests::Ran run(const fs::path& repo, const std::string& workflow) {
    tests::write_file(repo / ".github/workflows/w.yml", workflow);
    // --bind: the steps attack the trusted side through the repository directory itself.
    return tests::run_workflows(repo, {"--bind", "--report", (repo / "report.json").string()});
}

std::string report_of(const fs::path& repo) {
    return tests::read_file(repo / "report.json");
}

// `sandgate gate` of a one-commit repository holding `workflow`, and the report it wrote.
struct Gated {
    int code = -1;
    std::string output;
    std::string report;
};

Gated gate(const std::string& workflow) {
    const auto dir = tests::make_temp_dir("seams");
    const auto origin = dir / "origin";
    const std::string sha = tests::make_repo(origin, {{".github/workflows/g.yml", workflow}});
    const auto result =
        tests::gate_cli::gate("--repo " + origin.string() + " --sha " + sha + " --state-dir " +
                              (dir / "state").string() + " --report " + (dir / "r.json").string());
    UNSCOPED_INFO(result.out);
    std::error_code ec;
    return {result.code, result.out,
            fs::exists(dir / "r.json", ec) ? tests::read_file(dir / "r.json") : ""};
}

}  // namespace

TEST_CASE("file-command files swapped for links to host files are refused, never read (run)") {
    const Host host = host_side();
    const auto repo = tests::make_temp_dir("seams");
    tests::ScopedEnv canary("SANDGATE_SEAMS_CANARY", "canary-of-sandgates-own-environment");
    const auto ran = run(repo, with(R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - id: plant
        continue-on-error: true
        run: |
          ln -sf /proc/self/environ "$GITHUB_OUTPUT"
          ln -sf SECRET "$GITHUB_ENV"
          ln -sf SECRET "$GITHUB_PATH"
          ln -sf SECRET "$GITHUB_STEP_SUMMARY"
          ln -sf SECRET "$GITHUB_STATE"
      - run: echo "outputs=${{ toJSON(steps.plant.outputs) }} token=$API_TOKEN path=$PATH"
)",
                                    "SECRET", host.secret.string()));
    CHECK(ran.exit_code == 0);  // continue-on-error: the run goes on and succeeds
    const auto report = report_of(repo);
    for (const auto* leak : {k_secret, "canary-of-sandgates-own-environment"}) {
        CHECK(ran.output.find(leak) == std::string::npos);
        CHECK(report.find(leak) == std::string::npos);
    }
    for (const auto* refusal :
         {"$GITHUB_OUTPUT is not a regular file", "$GITHUB_ENV is not a regular file",
          "$GITHUB_PATH is not a regular file", "$GITHUB_STEP_SUMMARY is not a regular file"})
        CHECK(report.find(refusal) != std::string::npos);
    CHECK(tests::read_file(host.secret) == std::string("API_TOKEN=") + k_secret + "\n");
}

TEST_CASE("a FIFO or a 1 TiB sparse file as GITHUB_ENV fails the step at once (run)") {
    const auto repo = tests::make_temp_dir("seams");
    const auto started = Clock::now();
    const auto ran = run(repo, R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - continue-on-error: true
        run: rm -f "$GITHUB_ENV" && mkfifo "$GITHUB_ENV"
      - continue-on-error: true
        run: truncate -s 1T "$GITHUB_OUTPUT"
      - if: always()
        run: echo finished > finished.txt
)");
    CHECK(Clock::now() - started < std::chrono::seconds(60));
    CHECK(ran.exit_code == 0);
    const auto report = report_of(repo);
    CHECK(report.find("$GITHUB_ENV is not a regular file") != std::string::npos);
    CHECK(report.find("$GITHUB_OUTPUT is larger than 16777216 bytes") != std::string::npos);
    CHECK(tests::read_file(repo / "finished.txt") == "finished\n");
}

TEST_CASE(
    "RUNNER_TEMP or the file-command directory swapped for a link: nothing is written there "
    "(run)") {
    const Host host = host_side();
    const auto repo = tests::make_temp_dir("seams");
    auto ran = run(repo, with(R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: |
          d=$(dirname "$GITHUB_ENV")
          mv "$d" "$d.moved" && ln -s TARGET "$d"
      - continue-on-error: true
        run: echo next step
)",
                              "TARGET", host.target.string()));
    CHECK(ran.exit_code == 0);
    CHECK(fs::is_empty(host.target));  // no empty file-command files
    CHECK(report_of(repo).find("the file-command directory is not a directory") !=
          std::string::npos);
    ran = run(repo, with(R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: |
          # Under `sandgate run` RUNNER_TEMP is a mount point of the wrap (the rename fails);
          # in an agent's job sandbox it is not (test_job_executor.cpp tries that swap too).
          if mv "$RUNNER_TEMP" "$RUNNER_TEMP.moved"; then ln -s TARGET "$RUNNER_TEMP"; else echo RUNNER_TEMP-PINNED; fi
      - continue-on-error: true
        run: echo next step
)",
                         "TARGET", host.target.string()));
    CHECK(ran.exit_code == 0);
    CHECK(fs::is_empty(host.target));  // no script, no file-command files
    CHECK((report_of(repo).find("$RUNNER_TEMP is not a directory") != std::string::npos ||
           ran.output.find("RUNNER_TEMP-PINNED") != std::string::npos));
}

TEST_CASE("a link planted in the scratch HOME is never written through by a later step (run)") {
    SKIP_UNDER_WRAP("the dogfood run's steps have no wrap, so no scratch is seeded");
    const Host host = host_side();
    tests::write_file(host.target / "keep.gradle", "keep\n");
    const auto repo = tests::make_temp_dir("seams");
    const auto ran = run(repo, with(with(R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: |
          grep -q offline ~/.m2/settings.xml
          rm -rf ~/.m2 ~/.gradle/init.d && mkdir -p ~/.m2 ~/.gradle
          ln -s SECRET ~/.m2/settings.xml
          ln -s TARGET ~/.gradle/init.d
      - run: echo second step
      - run: echo third step
)",
                                         "SECRET", host.secret.string()),
                                    "TARGET", host.target.string()));
    CHECK(ran.exit_code == 0);
    CHECK(tests::read_file(host.secret) == std::string("API_TOKEN=") + k_secret + "\n");
    CHECK(tests::read_file(host.target / "keep.gradle") == "keep\n");
    CHECK_FALSE(fs::exists(host.target / "sandgate-offline.gradle"));
}

TEST_CASE("hashFiles hashes regular files only, within the step's time (run)") {
    const Host host = host_side();
    const auto repo = tests::make_temp_dir("seams");
    fs::create_symlink(host.secret, repo / "linked.lock");
    REQUIRE(::mkfifo((repo / "fifo.lock").c_str(), 0600) == 0);
    const auto started = Clock::now();
    auto ran = run(repo, R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: echo "links=[${{ hashFiles('*.lock') }}]"
)");
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("links=[]") !=
          std::string::npos);  // the link is not followed, the FIFO not opened
    { std::ofstream sparse(repo / "huge.bin", std::ios::binary); }
    fs::resize_file(repo / "huge.bin", std::uintmax_t(1) << 40);
    ran = run(repo, R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - timeout-minutes: 0.05
        continue-on-error: true
        run: echo "huge=${{ hashFiles('huge.bin') }}"
      - if: always()
        run: echo after > after.txt
)");
    CHECK(Clock::now() - started < std::chrono::seconds(60));
    CHECK(report_of(repo).find("hashFiles: the step's time ran out") != std::string::npos);
    CHECK(tests::read_file(repo / "after.txt") == "after\n");
}

TEST_CASE("add-matcher answers the same for every path it will not read (run)") {
    const Host host = host_side();
    const auto repo = tests::make_temp_dir("seams");
    fs::create_symlink(host.secret, repo / "linked.json");
    const auto missing = (host.dir / "no-such-file").string();
    const auto ran = run(repo, with(with(R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - continue-on-error: true
        run: echo "::add-matcher::SECRET"
      - continue-on-error: true
        run: echo "::add-matcher::MISSING"
      - continue-on-error: true
        run: echo "::add-matcher::linked.json"
)",
                                         "SECRET", host.secret.string()),
                                    "MISSING", missing));
    CHECK(ran.exit_code == 0);
    const auto report = report_of(repo);
    CHECK(report.find(host.secret.string() + ": cannot be read") != std::string::npos);
    CHECK(report.find(missing + ": cannot be read") != std::string::npos);
    CHECK(report.find((repo / "linked.json").string() + ": cannot be read") != std::string::npos);
    CHECK(report.find(k_secret) == std::string::npos);
}

TEST_CASE("a gate's steps cannot read host files through file-command links (gate)") {
    const Host host = host_side();
    const auto gated = gate(with(R"(on: merge_group
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - id: plant
        continue-on-error: true
        run: ln -sf SECRET "$GITHUB_OUTPUT"
      - run: echo "outputs=${{ toJSON(steps.plant.outputs) }}"
)",
                                 "SECRET", host.secret.string()));
    CHECK(gated.code == 0);
    CHECK(gated.output.find(k_secret) == std::string::npos);
    CHECK(gated.report.find("$GITHUB_OUTPUT is not a regular file") != std::string::npos);
}

TEST_CASE("actions/checkout into a path a step led through a link writes nothing outside (gate)") {
    const Host host = host_side();
    tests::write_file(host.target / "x", "a host file\n");
    const auto gated = gate(with(R"(on: merge_group
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: ln -s TARGET sub
      - continue-on-error: true
        uses: actions/checkout@v4
        with:
          path: sub/x
      - if: always()
        run: echo after
)",
                                 "TARGET", host.target.string()));
    CHECK(gated.code == 0);
    // Neither removed from nor checked out into.
    CHECK(tests::read_file(host.target / "x") == "a host file\n");
    CHECK(std::distance(fs::directory_iterator(host.target), fs::directory_iterator()) == 1);
    CHECK(gated.report.find("actions/checkout path 'sub/x' is not beneath the workspace") !=
          std::string::npos);
}

TEST_CASE("a local action's manifest swapped for a FIFO or a link fails its step at once (run)") {
    const Host host = host_side();
    const auto repo = tests::make_temp_dir("seams");
    const auto started = Clock::now();
    const auto ran = run(repo, with(R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: |
          mkdir -p fifo-action link-action
          mkfifo fifo-action/action.yml
          ln -s SECRET link-action/action.yml
      - continue-on-error: true
        uses: ./fifo-action
      - continue-on-error: true
        uses: ./link-action
      - if: always()
        run: echo after > after.txt
)",
                                    "SECRET", host.secret.string()));
    CHECK(Clock::now() - started < std::chrono::seconds(60));
    CHECK(ran.exit_code == 0);
    const auto report = report_of(repo);
    CHECK(report.find((repo / "fifo-action/action.yml").string() + " is not a regular file") !=
          std::string::npos);
    CHECK(report.find((repo / "link-action/action.yml").string() + " is not a regular file") !=
          std::string::npos);
    CHECK(report.find(k_secret) == std::string::npos);
    CHECK(tests::read_file(repo / "after.txt") == "after\n");
}

TEST_CASE("a called workflow an earlier job swapped for a link to a host file is not run (run)") {
    const Host host = host_side();
    tests::write_file(host.dir / "host-workflow.yml", R"(on: workflow_call
jobs:
  host:
    runs-on: ubuntu-latest
    steps:
      - run: echo HOST-WORKFLOW-RAN
)");
    const auto repo = tests::make_temp_dir("seams");
    tests::write_file(repo / ".github/workflows/called.yml", R"(on: workflow_call
jobs:
  inner:
    runs-on: ubuntu-latest
    steps:
      - run: echo the repository's own
)");
    const auto ran = run(repo, with(R"(on: push
jobs:
  plant:
    runs-on: ubuntu-latest
    steps:
      - run: ln -sf HOST .github/workflows/called.yml
  call:
    needs: plant
    uses: ./.github/workflows/called.yml
  after:
    needs: call
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: echo after > after.txt
)",
                                    "HOST", (host.dir / "host-workflow.yml").string()));
    CHECK(ran.exit_code != 0);  // the calling job fails
    CHECK(ran.output.find("HOST-WORKFLOW-RAN") == std::string::npos);
    CHECK(report_of(repo).find(
              "the called workflow './.github/workflows/called.yml' is not a regular file") !=
          std::string::npos);
    CHECK(tests::read_file(repo / "after.txt") == "after\n");
}

namespace {

tests::Ran exec(const fs::path& cwd, const std::vector<std::string>& args) {
    std::vector<std::string> all{"exec"};
    all.insert(all.end(), args.begin(), args.end());
    auto ran = tests::run_sandgate(cwd, all);
    UNSCOPED_INFO(ran.output);
    return ran;
}

}  // namespace

TEST_CASE(
    "as root, the sandbox is an unprivileged host uid that owns its trees (exec; needs root)") {
    SKIP_UNDER_WRAP("needs root to start bwrap as another host uid; the wrap's suite is not root");
    INFO("this test needs root: CI and the development machines run the suite as root");
    REQUIRE(::geteuid() == 0);
    const auto dir = tests::make_temp_dir("seams");
    fs::create_directories(dir / "closed/work");
    fs::permissions(dir / "closed", fs::perms::owner_all);  // root's 0700, as /root is
    tests::write_file(dir / "closed/work/tracked.txt", "tracked\n");
    tests::write_file(dir / "private/key", "root's own\n");
    fs::permissions(dir / "private", fs::perms::owner_all);
    fs::permissions(dir / "private/key", fs::perms::owner_read | fs::perms::owner_write);
    const auto ran =
        exec(dir / "closed/work", {"--read-only", (dir / "private").string(), "--", "sh", "-c",
                                   "echo changed >> tracked.txt && echo new > made.txt && "
                                   "{ cat " +
                                       (dir / "private/key").string() + " || echo DENIED; }"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("DENIED") != std::string::npos);
    CHECK(ran.output.find("root's own") == std::string::npos);
    struct stat st {};
    REQUIRE(::stat((dir / "closed/work/made.txt").c_str(), &st) == 0);
    CHECK(st.st_uid == 65534);
    CHECK(st.st_gid == 65534);
    CHECK(tests::read_file(dir / "closed/work/tracked.txt") == "tracked\nchanged\n");
    // --sandbox-user picks another; root is refused.
    const auto other =
        exec(dir / "closed/work", {"--sandbox-user", "4242:4343", "--", "touch", "other.txt"});
    CHECK(other.exit_code == 0);
    REQUIRE(::stat((dir / "closed/work/other.txt").c_str(), &st) == 0);
    CHECK(st.st_uid == 4242);
    CHECK(st.st_gid == 4343);
    const auto root = exec(dir / "closed/work", {"--sandbox-user", "0", "--", "true"});
    CHECK(root.exit_code == 125);  // a refused request: nothing ran
    CHECK(root.output.find("must not be root") != std::string::npos);
}

TEST_CASE(
    "the sandbox has a fresh session keyring, a bounded /dev/shm and a read-only /dev (exec)") {
    SKIP_UNDER_WRAP("keyctl is filtered inside the wrap and nested bwrap cannot mount /proc");
    const auto dir = tests::make_temp_dir("seams");
    // The caller's session keyring, named so it can be looked for.
    const long ring =
        ::syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "sandgate-seams-caller-ring");
    REQUIRE(ring > 0);
    const auto ran =
        exec(dir, {"--tmp-size", "8M", "--", "sh", "-c",
                   "cat /proc/keys; df -k /dev/shm | tail -1; "
                   "head -c 16M /dev/zero > /dev/shm/fill 2>/dev/null || echo SHM-FULL; "
                   "touch /dev/planted 2>/dev/null || echo DEV-READ-ONLY; echo ok > /dev/null && "
                   "echo NULL-OK"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("sandgate-seams-caller-ring") == std::string::npos);
    CHECK(ran.output.find("SHM-FULL") != std::string::npos);
    CHECK(ran.output.find("DEV-READ-ONLY") != std::string::npos);
    CHECK(ran.output.find("NULL-OK") != std::string::npos);
}

TEST_CASE("a toolchain cache is bound by its allowlisted directories only (exec)") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount /proc");
    const auto dir = tests::make_temp_dir("seams");
    const auto cache = dir / "cargo-home";
    tests::write_file(cache / "credentials.toml", "[registry]\ntoken = \"cargo-secret-20\"\n");
    tests::write_file(cache / "cargo/registry/index/entry", "crate\n");
    tests::write_file(cache / "pip/wheelhouse/x.whl", "wheel\n");
    fs::create_directory(dir / "work");
    const auto ran = exec(dir / "work", {"--toolchain-cache", cache.string(), "--", "sh", "-c",
                                         "cat " + (cache / "credentials.toml").string() +
                                             " 2>/dev/null || echo NO-CREDENTIALS; "
                                             "cat " +
                                             (cache / "pip/wheelhouse/x.whl").string() +
                                             "; cat ~/.cargo/registry/index/entry"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("cargo-secret-20") == std::string::npos);
    CHECK(ran.output.find("NO-CREDENTIALS") != std::string::npos);
    CHECK(ran.output.find("wheel") != std::string::npos);
    CHECK(ran.output.find("crate") != std::string::npos);
}

TEST_CASE("a kept scratch is seeded once: a link left in it is not written through (exec)") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount /proc");
    const Host host = host_side();
    const auto dir = tests::make_temp_dir("seams");
    fs::create_directory(dir / "work");
    const auto scratch = (dir / "scratch").string();
    auto first = exec(dir / "work",
                      {"--scratch", scratch, "--", "sh", "-c",
                       "grep -q offline ~/.m2/settings.xml && rm ~/.m2/settings.xml && ln -s " +
                           host.secret.string() + " ~/.m2/settings.xml"});
    CHECK(first.exit_code == 0);
    auto second = exec(dir / "work", {"--scratch", scratch, "--", "true"});
    CHECK(second.exit_code == 0);
    CHECK(tests::read_file(host.secret) == std::string("API_TOKEN=") + k_secret + "\n");
}
