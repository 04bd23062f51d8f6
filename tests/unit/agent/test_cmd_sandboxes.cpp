// `sandgate sandboxes`: the real binary driven against a real agent
// (tests/support/agent_fixture.hpp) over its unix socket. The sandboxes take the jobs' posture
// (bwrap; unwrapped inside the dogfood wrap, where a nested bwrap cannot start), so every case runs
// both ways.
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/broker/broker_protocol.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/numbers.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;
using namespace tests::agent_fixture;

namespace {

struct Ran {
    int status = -1;
    std::string out;
    std::string err;
};

// `sandgate sandboxes ARGS...` started with its stdout and stderr in files under `dir`.
struct Cli {
    Process process;
    std::filesystem::path out, err;

    Ran wait() {
        Ran ran;
        ran.status = process.wait();
        ran.out = tests::read_file(out);
        ran.err = tests::read_file(err);
        return ran;
    }
};

Cli start_cli(const std::filesystem::path& dir, std::vector<std::string> args) {
    static int serial = 0;
    ++serial;
    const auto out = dir / ("cli-" + std::to_string(serial) + ".out");
    const auto err = dir / ("cli-" + std::to_string(serial) + ".err");
    args.insert(args.begin(), {SANDGATE_BINARY, "sandboxes"});
    return Cli{spawn(std::move(args), dir / "marks", out, err), out, err};
}

// The 127.0.0.1 port an agent started with api.listen 127.0.0.1:0 chose, read from the
// "ready: api on 127.0.0.1:PORT" line of its log (no port picked here and bound later: another
// process could take it in between).
std::uint16_t bound_port(const std::filesystem::path& log) {
    constexpr std::string_view mark = "api on 127.0.0.1:";
    while (true) {
        const std::string text = std::filesystem::exists(log) ? tests::read_file(log) : "";
        if (const auto at = text.find(mark); at != std::string::npos) {
            const auto digits = text.substr(
                at + mark.size(),
                text.find_first_not_of("0123456789", at + mark.size()) - (at + mark.size()));
            if (auto port = tests::to_number<std::uint16_t>(digits)) return *port;
        }
        std::this_thread::sleep_for(20ms);
    }
}

struct Fixture {
    Agent agent;
    Process daemon = agent.start();

    Fixture() { agent.wait_ready(); }
    ~Fixture() {
        ::kill(daemon.pid, SIGTERM);
        daemon.wait();
    }
    Cli start(std::vector<std::string> args) {
        args.insert(args.begin(), {"--socket", agent.socket().string()});
        return start_cli(agent.dir, std::move(args));
    }
    Ran run(std::vector<std::string> args) { return start(std::move(args)).wait(); }

    // A new sandbox: its id and the root its steps run in.
    std::pair<std::string, std::filesystem::path> create() {
        auto ran = run({"create", "--repository", "octo/repo", "--sha", sha(1), "--run-id", "7",
                        "--attempt", "2", "--job-id", "build", "--ttl", "10m"});
        REQUIRE(ran.status == 0);
        simdjson::dom::parser parser;
        auto doc = parser.parse(ran.out).value();
        CHECK(doc.at_pointer("/identity/run_id").get_int64().value() == 7);
        CHECK(doc.at_pointer("/identity/job_id").get_string().value() == "build");
        return {std::string(doc["id"].get_string().value()),
                std::filesystem::path(std::string(doc["root"].get_string().value()))};
    }
};

// A step deaf to SIGTERM (so is its sleep) that writes the sleep's pid to `mark`, then waits
// far longer than any test.
std::string stubborn(const std::string& mark) {
    return "echo before; trap '' TERM; sleep 600 & echo $! > " + mark + ".tmp; mv " + mark +
           ".tmp " + mark + "; wait";
}

// True when the process whose pid the step wrote to `mark` is gone (or a zombie), looked at
// from inside the sandbox.
bool step_gone(Fixture& f, const std::string& id, const std::string& mark) {
    return f.run({"exec", id, "--shell",
                  "p=$(cat " + mark +
                      "); test ! -e /proc/$p || grep -q '^State:.Z' /proc/$p/status"})
               .status == 0;
}

}  // namespace

TEST_CASE("sandboxes create, exec, list, get and rm through the real CLI") {
    Fixture f;
    auto [id, root] = f.create();

    // The step's streams and exit status are passed through.
    auto failing = f.run({"exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 7"});
    CHECK(failing.status == 7);
    CHECK(failing.out == "out\n");
    CHECK(failing.err == "err\n");
    auto ok = f.run({"exec", id, "--env", "X=one", "--stdin-text", "hello", "--cwd", ".", "--shell",
                     "cat; echo \" $X\"; pwd > where"});
    CHECK(ok.status == 0);
    CHECK(ok.out == "hello one\n");
    CHECK(tests::read_file(root / "where") != "");
    // --env right before `--`: the `--` still ends sandgate's options, `-c` is sh's.
    auto env_then_argv = f.run({"exec", id, "--env", "Y=two", "--", "sh", "-c", "echo \"$Y\""});
    CHECK(env_then_argv.status == 0);
    CHECK(env_then_argv.out == "two\n");

    // --json: the API's answer, with the exec id asked for.
    auto json = f.run(
        {"exec", id, "--json", "--exec-id", "step-json", "--", "sh", "-c", "echo hi; exit 3"});
    CHECK(json.status == 3);
    simdjson::dom::parser parser;
    auto doc = parser.parse(json.out).value();
    CHECK(doc["exec_id"].get_string().value() == "step-json");
    CHECK(doc.at_pointer("/result/exit_code").get_int64().value() == 3);
    CHECK(sandbox::base64_decode(doc.at_pointer("/result/out/head_b64").get_string().value())
              .value() == "hi\n");

    // sandgate exec's statuses: timeout, not found, killed by a signal.
    auto timed_out =
        f.run({"exec", id, "--timeout", "1s", "--kill-grace", "1s", "--", "sleep", "600"});
    CHECK(timed_out.status == 124);
    CHECK(timed_out.err.find("timed out") != std::string::npos);
    CHECK(f.run({"exec", id, "--", "no-such-program-here"}).status == 127);
    CHECK(f.run({"exec", id, "--shell", "kill -KILL $$"}).status == 128 + SIGKILL);

    // Output over --output-limit: the head and the tail, with a line saying what was dropped.
    auto big = f.run({"exec", id, "--output-limit", "1K", "--shell", "seq 1 100000"});
    CHECK(big.status == 0);
    CHECK(big.out.starts_with("1\n2\n"));
    CHECK(big.out.ends_with("99999\n100000\n"));
    CHECK(big.err.find("dropped here (--output-limit)") != std::string::npos);

    auto list = f.run({"list"});
    CHECK(list.status == 0);
    CHECK(list.out.find("\"id\":\"" + id + "\"") != std::string::npos);
    auto got = f.run({"get", id});
    CHECK(got.status == 0);
    CHECK(got.out.find("\"running_exec\":null") != std::string::npos);
    CHECK(got.out.find("\"repository\":\"octo/repo\"") != std::string::npos);

    auto removed = f.run({"rm", id});
    CHECK(removed.status == 0);
    CHECK(removed.out.find("\"destroyed\":true") != std::string::npos);
    auto gone = f.run({"get", id});
    CHECK(gone.status == 1);
    CHECK(gone.out.empty());
    CHECK(gone.err == "sandgate sandboxes: HTTP 404: no sandbox " + id + "\n");
    auto exec_gone = f.run({"exec", id, "--", "true"});
    CHECK(exec_gone.status == 125);
    CHECK(exec_gone.err == "sandgate sandboxes: HTTP 404: no sandbox " + id + "\n");
    CHECK(f.run({"list"}).out.find(id) == std::string::npos);
}

TEST_CASE("SIGINT to `sandboxes exec` cancels the step on the agent; so does `sandboxes cancel`") {
    Fixture f;
    auto [id, root] = f.create();

    auto interrupted = f.start({"exec", id, "--exec-id", "step-1", "--kill-grace", "500ms",
                                "--shell", stubborn("started-1")});
    wait_path(root / "started-1");
    ::kill(interrupted.process.pid, SIGINT);
    auto ran = interrupted.wait();
    CHECK(ran.status == 130);
    CHECK(ran.out == "before\n");
    CHECK(ran.err.find("cancelling exec step-1") != std::string::npos);
    // The agent says it has finished (it was stopped), the sandbox is free, the sleep is dead.
    auto late = f.run({"cancel", id, "step-1"});
    CHECK(late.status == 1);
    CHECK(late.err ==
          "sandgate sandboxes: HTTP 409: exec step-1 in sandbox " + id + " has finished\n");
    CHECK(f.run({"get", id}).out.find("\"running_exec\":null") != std::string::npos);
    CHECK(step_gone(f, id, "started-1"));

    // --json: the API's answer says who cancelled it.
    auto json = f.start({"exec", id, "--json", "--exec-id", "step-j", "--kill-grace", "500ms",
                         "--shell", stubborn("started-j")});
    wait_path(root / "started-j");
    ::kill(json.process.pid, SIGINT);
    auto answered = json.wait();
    CHECK(answered.status == 130);
    CHECK(answered.out.find("\"cancelled_by\":\"api\"") != std::string::npos);
    CHECK(answered.out.find("\"kind\":\"cancelled\"") != std::string::npos);
    CHECK(step_gone(f, id, "started-j"));

    // Cancelled by someone else: the exec's client reports it (130, cancelled_by api).
    auto other = f.start({"exec", id, "--json", "--exec-id", "step-2", "--kill-grace", "500ms",
                          "--shell", stubborn("started-2")});
    wait_path(root / "started-2");
    CHECK(f.run({"get", id}).out.find("\"running_exec\":\"step-2\"") != std::string::npos);
    auto busy = f.run({"exec", id, "--", "true"});  // one step at a time: refused, nothing ran
    CHECK(busy.status == 125);
    CHECK(busy.err.starts_with("sandgate sandboxes: HTTP 409: "));
    CHECK(std::count(busy.err.begin(), busy.err.end(), '\n') == 1);
    auto cancel = f.run({"cancel", id, "step-2"});
    CHECK(cancel.status == 0);
    CHECK(cancel.out.find("\"outcome\":\"cancel_requested\"") != std::string::npos);
    auto cancelled = other.wait();
    CHECK(cancelled.status == 130);
    CHECK(cancelled.out.find("\"cancelled_by\":\"api\"") != std::string::npos);
    CHECK(step_gone(f, id, "started-2"));
    CHECK(f.run({"cancel", id, "never-ran"}).err ==
          "sandgate sandboxes: HTTP 404: no exec never-ran in sandbox " + id + "\n");
    CHECK(f.run({"rm", id}).status == 0);
}

TEST_CASE("bad sandboxes input: one line naming the flag, exit 2; no agent: exit 3") {
    Fixture f;
    auto usage = [&](std::vector<std::string> args, const std::string& named) {
        auto ran = f.run(std::move(args));
        CHECK(ran.status == 2);
        CHECK(ran.out.empty());
        CHECK(ran.err.find(named) != std::string::npos);
        CHECK(std::count(ran.err.begin(), ran.err.end(), '\n') == 1);
    };
    usage({"create", "--repository", "octo/repo", "--job-id", "build"}, "--sha");
    usage({"create", "--repository", "octo/repo", "--sha", "abc", "--job-id", "b", "--run-id", "x"},
          "--run-id");
    usage({"create", "--repository", "octo/repo", "--sha", "abc", "--job-id", "b", "--ttl", "2d"},
          "--ttl");
    usage({"create", "--repository", "octo/repo", "--sha", "abc", "--job-id", "b", "--network",
           "all"},
          "--network");
    usage({"exec", "sb-x", "--timeout", "soon", "--", "true"}, "--timeout");
    usage({"exec", "sb-x", "--timeout", "0s", "--", "true"}, "--timeout");
    usage({"exec", "sb-x", "--env", "NOVALUE", "--", "true"}, "--env NOVALUE");
    usage({"exec", "sb-x", "--output-limit", "lots", "--", "true"}, "--output-limit");
    usage({"exec", "sb-x", "--exec-id", "no/slash", "--", "true"}, "--exec-id");
    usage({"exec", "sb-x"}, "nothing to run");
    usage({"exec", "sb-x", "--shell", "true", "--", "true"}, "--shell");
    usage({"rm", "../jobs"}, "ID ../jobs");
    usage({"cancel", "sb-x", "bad id"}, "EXEC_ID bad id");
    usage({"frobnicate"}, "frobnicate");
    CHECK(f.run({"list"}).out == "{\"sandboxes\":[]}\n");  // nothing was made on the way

    auto unreachable =
        start_cli(f.agent.dir, {"--socket", (f.agent.dir / "no.sock").string(), "list"}).wait();
    CHECK(unreachable.status == 3);
    CHECK(unreachable.err.starts_with("sandgate sandboxes: cannot reach the agent at "));
    auto help = start_cli(f.agent.dir, {"--help"}).wait();
    CHECK(help.status == 0);
    CHECK(help.out.find("Exit status:") != std::string::npos);
}

TEST_CASE("sandboxes over --url with --token-file, as jobs reaches a 127.0.0.1 agent") {
    Agent agent;
    const auto token = agent.dir / "token";
    tests::write_file(token, "sandboxes-cli-token\n");
    std::filesystem::permissions(
        token, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    tests::write_file(agent.config,
                      tests::read_file(agent.config) +
                          "api:\n  listen: 127.0.0.1:0\n  token_file: " + token.string() + "\n");
    Process daemon = agent.start(agent.dir / "agent.log");
    const std::string url =
        "http://127.0.0.1:" + std::to_string(bound_port(agent.dir / "agent.log"));
    const std::vector<std::string> tcp = {"--url", url, "--token-file", token.string()};
    auto with = [&](std::vector<std::string> args) {
        args.insert(args.begin(), tcp.begin(), tcp.end());
        return start_cli(agent.dir, std::move(args)).wait();
    };
    while (with({"list"}).status != 0) std::this_thread::sleep_for(20ms);

    auto refused = start_cli(agent.dir, {"--url", url, "list"}).wait();
    CHECK(refused.status == 1);
    CHECK(refused.err == "sandgate sandboxes: HTTP 401: a bearer token is required\n");
    auto created =
        with({"create", "--repository", "octo/repo", "--sha", sha(2), "--job-id", "lint"});
    REQUIRE(created.status == 0);
    simdjson::dom::parser parser;
    const std::string id(parser.parse(created.out).value()["id"].get_string().value());
    auto ran = with({"exec", id, "--", "echo", "over", "tcp"});
    CHECK(ran.status == 0);
    CHECK(ran.out == "over tcp\n");
    CHECK(with({"rm", id}).status == 0);
    auto loose = agent.dir / "loose-token";
    tests::write_file(loose, "x\n");
    std::filesystem::permissions(loose, std::filesystem::perms::all);
    auto unsafe =
        start_cli(agent.dir, {"--url", url, "--token-file", loose.string(), "list"}).wait();
    CHECK(unsafe.status == 2);
    CHECK(unsafe.err.find(loose.string()) != std::string::npos);
    ::kill(daemon.pid, SIGTERM);
    daemon.wait();
}
