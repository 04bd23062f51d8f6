// `sandgate exec` end to end: the real binary, run (unsandboxed) through sandbox::run, its
// JSON document parsed with simdjson.
#include <fcntl.h>
#include <signal.h>
#include <simdjson.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/process/run.hpp"
#include "sandbox/wrap/wrap.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

sandbox::RunResult sandgate(std::vector<std::string> args,
                            std::optional<std::string> stdin_text = {},
                            const sandbox::Environment& extra_env = {}) {
    sandbox::RunRequest request;
    request.argv = {SANDGATE_BINARY, "exec"};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.env = sandbox::child_environment(sandbox::current_environment(), {}, extra_env);
    request.policy.mode = sandbox::SandboxMode::off;
    request.output_limit = 8 * 1024 * 1024;
    request.stdin_text = std::move(stdin_text);
    return sandbox::run(request);
}

std::vector<std::string> child(std::vector<std::string> args) {
    std::vector<std::string> argv = {"--sandbox", "off", "--json", "--", SANDGATE_TEST_CHILD};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

struct Doc {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
};

void parse(Doc& doc, const std::string& text) {
    INFO(text);
    REQUIRE(doc.parser.parse(text).get(doc.root) == simdjson::SUCCESS);
}

bool is_null(simdjson::dom::element element) {
    return element.is_null();
}

}  // namespace

TEST_CASE("--json prints one document with every field, in order") {
    const auto result = sandgate(child({"exit", "3"}));
    CHECK(result.exit_code == 3);
    CHECK(result.err.bytes == 0);
    Doc doc;
    parse(doc, result.out.head);
    CHECK(int64_t(doc.root["exit_code"]) == 3);
    CHECK(is_null(doc.root["signal"]));
    CHECK(bool(doc.root["timed_out"]) == false);
    CHECK(int64_t(doc.root["duration_ms"]) >= 0);
    CHECK(uint64_t(doc.root["stdout"]["bytes"]) == 0);
    CHECK(bool(doc.root["stdout"]["truncated"]) == false);
    CHECK(std::string_view(doc.root["stderr"]["text"]).empty());
    CHECK(std::string_view(doc.root["stderr"]["tail"]).empty());
    CHECK(uint64_t(doc.root["skip_markers"]) == 0);
    const std::string_view tree = doc.root["tree_kill"];
    CHECK((tree == "cgroup" || tree == "subreaper"));
    CHECK(std::string_view(doc.root["sandbox"]["mode"]) == "off");
    CHECK(is_null(doc.root["error"]));
    std::vector<std::string_view> keys;
    for (auto field : simdjson::dom::object(doc.root)) keys.push_back(field.key);
    CHECK(keys == std::vector<std::string_view>{"exit_code", "signal", "timed_out", "duration_ms",
                                                "stdout", "stderr", "skip_markers", "tree_kill",
                                                "sandbox", "error"});
    CHECK(result.out.head.back() == '\n');
    CHECK(std::count(result.out.head.begin(), result.out.head.end(), '\n') == 1);
}

TEST_CASE("exit statuses: the child's, 128+N, 124, 126, 127") {
    CHECK(sandgate(child({"exit", "0"})).exit_code == 0);
    CHECK(sandgate(child({"exit", "42"})).exit_code == 42);
    CHECK(sandgate(child({"kill-self", "15"})).exit_code == 143);
    const auto timed_out =
        sandgate({"--sandbox", "off", "--json", "--timeout", "300ms", "--kill-grace", "1s", "--",
                  SANDGATE_TEST_CHILD, "forever", tests::unique_marker()});
    CHECK(timed_out.exit_code == 124);
    Doc doc;
    parse(doc, timed_out.out.head);
    CHECK(bool(doc.root["timed_out"]));
    CHECK(std::string_view(doc.root["error"]["kind"]) == "timeout");
    CHECK(int64_t(doc.root["signal"]) == 15);

    const auto missing = sandgate({"--sandbox", "off", "--json", "--", "sandgate-no-such-program"});
    CHECK(missing.exit_code == 127);
    Doc missing_doc;
    parse(missing_doc, missing.out.head);
    CHECK(std::string_view(missing_doc.root["error"]["kind"]) == "spawn_failed");
    CHECK(is_null(missing_doc.root["exit_code"]));

    const auto dir = tests::make_temp_dir("exec");
    tests::write_file(dir / "plain", "not a program\n");
    CHECK(sandgate({"--sandbox", "off", "--", (dir / "plain").string()}).exit_code == 126);
}

TEST_CASE("--shell runs a script with sh semantics; output streams live without --json") {
    const auto result = sandgate({"--sandbox", "off", "--shell", "echo out; echo err >&2; exit 7"});
    CHECK(result.exit_code == 7);
    CHECK(result.out.head == "out\n");
    CHECK(result.err.head == "err\n");
}

TEST_CASE("bad input: one line on stderr, 125, nothing run") {
    const auto dir = tests::make_temp_dir("exec");
    const std::string flag = (dir / "ran").string();
    const std::string script = "touch " + flag;
    tests::write_file(dir / "big", std::string(sandbox::k_max_stdin_bytes + 1, 'x'));
    tests::write_file(dir / "ok", std::string(sandbox::k_max_stdin_bytes, 'x'));
    const std::vector<std::vector<std::string>> cases = {
        {"--sandbox", "off", "--frobnicate", "--shell", script},
        {"--sandbox", "off", "--timeout", "5 parsecs", "--shell", script},
        {"--sandbox", "off", "--timeout", "0s", "--shell", script},
        {"--sandbox", "off", "--kill-grace", "x", "--shell", script},
        {"--sandbox", "off", "--output-limit", "lots", "--shell", script},
        {"--sandbox", "off", "--stdin-file", (dir / "big").string(), "--shell", script},
        {"--sandbox", "off", "--stdin-file", (dir / "absent").string(), "--shell", script},
        {"--sandbox", "off", "--stdin-text", "a", "--stdin-file", (dir / "ok").string(), "--shell",
         script},
        {"--sandbox", "off", "--cwd", (dir / "missing").string(), "--shell", script},
        {"--sandbox", "off", "--env", "NOEQUALS", "--shell", script},
        {"--sandbox", "off", "--json"},
        {"--sandbox", "off", "--json", "--"},
        {"--sandbox", "off", "--shell", script, "--", "true"},
        {"--sandbox", "sideways", "--shell", script},
    };
    for (const auto& args : cases) {
        std::string joined;
        for (const auto& arg : args) joined += arg + " ";
        INFO(joined);
        const auto result = sandgate(args);
        CHECK(result.exit_code == 125);
        CHECK(result.out.bytes == 0);
        CHECK(std::count(result.err.head.begin(), result.err.head.end(), '\n') == 1);
        CHECK(result.err.head.starts_with("sandgate exec: "));
    }
    CHECK_FALSE(std::filesystem::exists(flag));
    CHECK(sandgate({"--sandbox", "off", "--stdin-file", (dir / "ok").string(), "--shell", script})
              .exit_code == 0);
    CHECK(std::filesystem::exists(flag));
}

TEST_CASE("--cwd in the wrap's private scratch is refused naming the flag: 125, nothing run") {
    const auto dir = tests::make_temp_dir("exec");
    const std::string flag = (dir / "ran").string();
    // A path that exists only inside a sandbox (a run's HOME, say): never on this host.
    const std::string inside =
        std::string(sandbox::k_private_scratch) + "/home/" + dir.filename().string();
    for (const std::string& cwd : {inside, std::string(sandbox::k_private_scratch)}) {
        if (std::filesystem::exists(cwd)) continue;  // inside the dogfood wrap, the root exists
        const auto result = sandgate({"--cwd", cwd, "--shell", "touch " + flag});
        INFO(result.err.head);
        CHECK(result.exit_code == 125);
        CHECK(result.out.bytes == 0);
        CHECK(std::count(result.err.head.begin(), result.err.head.end(), '\n') == 1);
        CHECK(result.err.head.starts_with("sandgate exec: --cwd " + cwd + ": "));
        CHECK(result.err.head.find("private scratch") != std::string::npos);
    }
    CHECK_FALSE(std::filesystem::exists(flag));
    // Under --sandbox off the path has no special meaning: just a missing directory.
    const auto off = sandgate({"--sandbox", "off", "--cwd", inside, "--shell", "touch " + flag});
    CHECK(off.exit_code == 125);
    CHECK(off.err.head.find("no such directory") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(flag));
}

TEST_CASE("a refused sandbox prints the document with the refusal and exits 125") {
    // The container arm without an image (or a runtime) cannot run anything: it fails closed.
    const auto result = sandgate({"--sandbox", "container", "--json", "--", "true"});
    CHECK(result.exit_code == 125);
    Doc doc;
    parse(doc, result.out.head);
    const std::string_view kind = doc.root["error"]["kind"];
    CHECK((kind == "sandbox_unavailable" || kind == "invalid_request"));
    CHECK(is_null(doc.root["exit_code"]));
}

TEST_CASE("stdin, environment, cwd and output limits reach the command") {
    auto result = sandgate(child({"cat"}), std::nullopt);
    CHECK(result.exit_code == 0);
    auto fed = sandgate(
        {"--sandbox", "off", "--stdin-text", "from text", "--", SANDGATE_TEST_CHILD, "cat"});
    CHECK(fed.out.head == "from text");

    // sandgate's own environment holds a secret and a variable to pass on.
    const sandbox::Environment agent_env = {{"SANDGATE_EXEC_TEST_SECRET", "hush"},
                                            {"SANDGATE_EXEC_PASSED", "passed"}};
    auto env = sandgate({"--sandbox", "off", "--env", "A=1", "--env", "B=x=y", "--pass-env",
                         "SANDGATE_EXEC_PASSED", "--", SANDGATE_TEST_CHILD, "env"},
                        std::nullopt, agent_env);
    CHECK(env.out.head.find("A=1\n") != std::string::npos);
    CHECK(env.out.head.find("B=x=y\n") != std::string::npos);
    CHECK(env.out.head.find("SANDGATE_EXEC_PASSED=passed\n") != std::string::npos);
    CHECK(env.out.head.find("hush") == std::string::npos);
    CHECK(env.out.head.find("SANDGATE_EXEC_TEST_SECRET") == std::string::npos);

    // `--` right after --env or --pass-env still ends the options: the command's own
    // (`-c`) reach it.
    auto dashed = sandgate({"--sandbox", "off", "--env", "A=dashed", "--", "/bin/sh", "-c",
                            "echo \"$A\" \"$SANDGATE_EXEC_PASSED\""});
    CHECK(dashed.exit_status() == 0);
    CHECK(dashed.out.head == "dashed \n");
    auto passed = sandgate({"--sandbox", "off", "--pass-env", "SANDGATE_EXEC_PASSED", "--",
                            "/bin/sh", "-c", "echo \"$SANDGATE_EXEC_PASSED\""},
                           std::nullopt, agent_env);
    CHECK(passed.exit_status() == 0);
    CHECK(passed.out.head == "passed\n");

    const auto dir = tests::make_temp_dir("exec");
    auto pwd =
        sandgate({"--sandbox", "off", "--cwd", dir.string(), "--", SANDGATE_TEST_CHILD, "pwd"});
    CHECK(pwd.out.head == std::filesystem::canonical(dir).string() + "\n");

    auto limited = sandgate({"--sandbox", "off", "--json", "--output-limit", "1K", "--",
                             SANDGATE_TEST_CHILD, "spew", "out", "200000"});
    Doc doc;
    parse(doc, limited.out.head);
    CHECK(uint64_t(doc.root["stdout"]["bytes"]) == 200000);
    CHECK(std::string_view(doc.root["stdout"]["text"]).size() == 1024);
    CHECK(std::string_view(doc.root["stdout"]["tail"]).size() == sandbox::k_tail_bytes);
    CHECK(bool(doc.root["stdout"]["truncated"]));
}

TEST_CASE("invalid UTF-8 in output becomes U+FFFD in the document") {
    auto result = sandgate(child({"bytes", "out", "41ff42c3"}));
    Doc doc;
    parse(doc, result.out.head);
    CHECK(std::string_view(doc.root["stdout"]["text"]) ==
          "A\xEF\xBF\xBD"
          "B\xEF\xBF\xBD");
    CHECK(uint64_t(doc.root["stdout"]["bytes"]) == 4);
}

TEST_CASE("skip markers and a double-forked daemon through the command") {
    const std::string marker = tests::unique_marker();
    auto result = sandgate({"--sandbox", "off", "--json", "--shell",
                            std::string("echo SKIP-UNDER-WRAP; echo 'SKIP-UNDER-WRAP x' >&2; ") +
                                SANDGATE_TEST_CHILD + " double-fork " + marker});
    Doc doc;
    parse(doc, result.out.head);
    CHECK(uint64_t(doc.root["skip_markers"]) == 2);
    CHECK(int64_t(doc.root["exit_code"]) == 0);
    CHECK(tests::processes_with(marker).empty());
}

namespace {

// Runs `sandgate exec ARGS` in the background with stdout to a file, waits until a process
// carrying `marker` is up, sends `sig` to sandgate and returns its exit status.
int interrupt_sandgate(const std::vector<std::string>& args, const std::string& marker, int sig,
                       const std::filesystem::path& out_file) {
    std::vector<std::string> argv = {SANDGATE_BINARY, "exec"};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) ::_exit(126);
        std::vector<char*> raw;
        for (auto& arg : argv) raw.push_back(arg.data());
        raw.push_back(nullptr);
        ::execv(raw[0], raw.data());
        ::_exit(127);
    }
    // Both the child and its TERM-ignoring grandchild must be up before the signal.
    for (int i = 0; i < 3000 && tests::processes_with(marker).size() < 2; ++i) ::usleep(10'000);
    REQUIRE(tests::processes_with(marker).size() >= 2);
    ::kill(pid, sig);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("SIGTERM or SIGINT to sandgate stops the whole tree first, then exits 128+N") {
    const auto dir = tests::make_temp_dir("interrupt");
    const int sig = GENERATE(SIGTERM, SIGINT);
    const std::string marker = tests::unique_marker();
    const int status = interrupt_sandgate({"--sandbox", "off", "--json", "--kill-grace", "1s", "--",
                                           SANDGATE_TEST_CHILD, "term-tree", marker},
                                          marker, sig, dir / "out.json");
    CHECK(status == 128 + sig);
    CHECK(tests::processes_with(marker).empty());
    Doc doc;
    parse(doc, tests::read_file(dir / "out.json"));
    CHECK(std::string_view(doc.root["error"]["kind"]) == "cancelled");
}

TEST_CASE("under the wrap, sandgate exec returns only once every process of the sandbox is gone") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no sandbox starts");
    const auto dir = tests::make_temp_dir("exec");
    const std::string name = tests::unique_process_name();
    std::vector<std::string> argv = {SANDGATE_BINARY,
                                     "exec",
                                     "--sandbox",
                                     "bwrap",
                                     "--cwd",
                                     dir.string(),
                                     "--",
                                     "python3",
                                     "-c",
                                     tests::k_slow_dying_daemon,
                                     name};
    std::vector<char*> raw;
    for (auto& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    // Spawned and waited for directly: a run through sandbox::run would itself wait for the
    // whole tree and hide what this test looks for.
    pid_t pid = 0;
    REQUIRE(::posix_spawn(&pid, raw[0], nullptr, nullptr, raw.data(), environ) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    const auto left = tests::processes_named(name);  // before anything else, right after the return
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(left.empty());
}
