// sandbox::run with real processes (the helper child), policy mode off. Every tree test runs
// with both mechanisms: the cgroup leaf (where writable) and the per-run subreaper.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.hpp"
#include "sandbox/process/cgroup.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/numbers.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

using namespace std::chrono_literals;
using sandbox::CgroupUse;
using sandbox::RunErrorKind;
using sandbox::RunRequest;
using sandbox::RunResult;

namespace {

RunRequest child_request(std::vector<std::string> args, CgroupUse cgroup = CgroupUse::automatic) {
    RunRequest request;
    request.argv = {SANDGATE_TEST_CHILD};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.env = sandbox::child_environment(sandbox::current_environment(), {}, {});
    request.policy.mode = sandbox::SandboxMode::off;
    request.cgroup = cgroup;
    return request;
}

sandbox::TreeKill expected_mechanism(CgroupUse cgroup) {
    if (cgroup == CgroupUse::never || !sandbox::Cgroup::base()) return sandbox::TreeKill::subreaper;
    return sandbox::TreeKill::cgroup;
}

// The bytes `spew` writes: 'a'..'z' then '\n', repeating.
std::string spew_pattern(std::size_t from, std::size_t count) {
    std::string text(count, '\0');
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t at = (from + i) % (64 * 1024) % 27;
        text[i] = at == 26 ? '\n' : static_cast<char>('a' + at);
    }
    return text;
}

// The `spew` pattern restarts every 64 KiB write; this rebuilds the stream exactly.
std::string spew_stream(std::size_t from, std::size_t count) {
    std::string text;
    text.reserve(count);
    for (std::size_t i = from; i < from + count; ++i) {
        const std::size_t at = i % (64 * 1024) % 27;
        text += at == 26 ? '\n' : static_cast<char>('a' + at);
    }
    return text;
}

}  // namespace

TEST_CASE("exit codes and signals are reported as they happened") {
    const CgroupUse cgroup = GENERATE(CgroupUse::automatic, CgroupUse::never);
    RunResult ok = sandbox::run(child_request({"exit", "0"}, cgroup));
    CHECK_FALSE(ok.error);
    CHECK(ok.exit_code == 0);
    CHECK_FALSE(ok.signal);
    CHECK(ok.exit_status() == 0);
    CHECK(ok.tree_kill == expected_mechanism(cgroup));

    RunResult three = sandbox::run(child_request({"exit", "3"}, cgroup));
    CHECK_FALSE(three.error);  // a non-zero exit is an outcome, not an error
    CHECK(three.exit_code == 3);
    CHECK(three.exit_status() == 3);

    RunResult killed = sandbox::run(child_request({"kill-self", "9"}, cgroup));
    CHECK_FALSE(killed.exit_code);
    CHECK(killed.signal == 9);
    CHECK(killed.exit_status() == 137);

    RunResult aborted = sandbox::run(child_request({"kill-self", "10"}, cgroup));
    CHECK(aborted.signal == 10);
    CHECK(aborted.exit_status() == 138);
}

TEST_CASE("a missing program is 127, a non-executable one 126, both before anything runs") {
    const auto dir = tests::make_temp_dir("run");
    RunRequest missing = child_request({});
    missing.argv = {"sandgate-no-such-program-anywhere"};
    RunResult result = sandbox::run(missing);
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::spawn_failed);
    CHECK(result.error->message.find("sandgate-no-such-program-anywhere") != std::string::npos);
    CHECK(result.exit_status() == 127);
    CHECK_FALSE(result.exit_code);

    missing.argv = {(dir / "absent").string()};
    CHECK(sandbox::run(missing).exit_status() == 127);

    tests::write_file(dir / "not-executable", "#!/bin/sh\necho hi\n");
    RunRequest denied = child_request({});
    denied.argv = {(dir / "not-executable").string()};
    result = sandbox::run(denied);
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::spawn_failed);
    CHECK(result.exit_status() == 126);

    tests::write_file(dir / "garbage", std::string("\x7f\x01\x02garbage", 10));
    ::chmod((dir / "garbage").c_str(), 0755);
    denied.argv = {(dir / "garbage").string()};
    CHECK(sandbox::run(denied).exit_status() == 126);  // ENOEXEC

    denied.argv = {dir.string()};  // a directory
    CHECK(sandbox::run(denied).exit_status() == 126);
}

TEST_CASE("invalid requests are refused with 125 and nothing runs") {
    const auto dir = tests::make_temp_dir("run");
    const std::string flag = (dir / "ran").string();
    RunRequest request = child_request({});
    request.argv = {"/bin/sh", "-c", "touch " + flag};

    RunRequest no_argv = request;
    no_argv.argv.clear();
    RunResult result = sandbox::run(no_argv);
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::invalid_request);
    CHECK(result.exit_status() == 125);

    RunRequest big_stdin = request;
    big_stdin.stdin_text = std::string(sandbox::k_max_stdin_bytes + 1, 'x');
    result = sandbox::run(big_stdin);
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::invalid_request);
    CHECK(result.exit_status() == 125);

    RunRequest bad_cwd = request;
    bad_cwd.cwd = dir / "missing";
    result = sandbox::run(bad_cwd);
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::invalid_request);
    CHECK(result.error->message.find("missing") != std::string::npos);

    RunRequest bad_env = request;
    bad_env.env.emplace_back("A=B", "c");
    CHECK(sandbox::run(bad_env).exit_status() == 125);

    CHECK_FALSE(std::filesystem::exists(flag));
    REQUIRE(sandbox::run(request).exit_status() == 0);  // the same request, valid, does run
    CHECK(std::filesystem::exists(flag));
}

TEST_CASE("a sandbox that cannot be had fails closed with sandbox_unavailable") {
    RunRequest request = child_request({"exit", "0"});
    request.policy.mode = sandbox::SandboxMode::container;
    request.policy.container_runtime = "/nonexistent/sandgate-runtime";
    request.policy.image = "debian:12";
    const RunResult result = sandbox::run(request);
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::sandbox_unavailable);
    CHECK(result.exit_status() == 125);
    CHECK_FALSE(result.exit_code);
}

TEST_CASE("output: exact byte counts, head, tail and truncation") {
    const CgroupUse cgroup = GENERATE(CgroupUse::automatic, CgroupUse::never);
    RunResult small = sandbox::run(child_request({"spew", "out", "1000"}, cgroup));
    CHECK(small.out.bytes == 1000);
    CHECK(small.out.head == spew_stream(0, 1000));
    CHECK(small.out.tail.empty());
    CHECK_FALSE(small.out.truncated);
    CHECK(small.err.bytes == 0);

    RunRequest limited = child_request({"spew", "err", "3000000"}, cgroup);
    limited.output_limit = 1000;
    RunResult big = sandbox::run(limited);
    CHECK(big.err.bytes == 3000000);
    CHECK(big.err.head == spew_stream(0, 1000));
    REQUIRE(big.err.tail.size() == sandbox::k_tail_bytes);
    CHECK(big.err.tail == spew_stream(3000000 - sandbox::k_tail_bytes, sandbox::k_tail_bytes));
    CHECK(big.err.truncated);
    CHECK(big.out.bytes == 0);
    CHECK(big.exit_code == 0);

    RunRequest just_over = child_request({"spew", "out", "1010"}, cgroup);
    just_over.output_limit = 1000;
    RunResult over = sandbox::run(just_over);
    CHECK(over.out.head.size() == 1000);
    CHECK(over.out.tail == spew_stream(1000, 10));
    CHECK_FALSE(over.out.truncated);  // head + tail is the whole stream

    RunRequest nothing_kept = child_request({"spew", "out", "100"}, cgroup);
    nothing_kept.output_limit = 0;
    RunResult none = sandbox::run(nothing_kept);
    CHECK(none.out.head.empty());
    CHECK(none.out.tail == spew_stream(0, 100));
    CHECK(none.out.bytes == 100);
    (void)spew_pattern;
}

TEST_CASE("skip markers are counted on both streams, across reads and beyond the bound") {
    RunRequest request = child_request({});
    const std::string child = SANDGATE_TEST_CHILD;
    request.argv = {"/bin/sh", "-c",
                    child + " lines out 40000 'x SKIP-UNDER-WRAP(y) SKIP-UNDER-WRAP' && " + child +
                        " lines err 3 'SKIP-UNDER-WRAP' && " + child + " lines out 5 'nothing'"};
    request.output_limit = 100;
    RunResult result = sandbox::run(request);
    CHECK(result.exit_code == 0);
    CHECK(result.skip_markers == 40003);
    CHECK(result.out.truncated);

    RunRequest split = child_request({"pieces", "out", "50", "SKIP-UN", "DER-WRAP\\nSKIP-UNDER-",
                                      "WRAP SKIP-UNDER-WRAP\\nplain\\nS", "KIP-UNDER-WR", "AP"});
    RunResult pieces = sandbox::run(split);
    CHECK(pieces.out.head ==
          "SKIP-UNDER-WRAP\nSKIP-UNDER-WRAP SKIP-UNDER-WRAP\nplain\nSKIP-UNDER-WRAP");
    CHECK(pieces.skip_markers == 3);
}

// Both streams at once, one flooding and one sparse: each arrives whole, in order, with every
// marker, live and captured (POLLHUP on one pipe while the other still flows included).
TEST_CASE("two streams flowing at once: every byte in order, live and captured, every marker") {
    struct Recorder : sandbox::OutputObserver {
        std::string out;
        std::uint64_t err_bytes = 0;
        void on_output(sandbox::Stream stream, std::string_view chunk) override {
            if (stream == sandbox::Stream::out)
                out.append(chunk);
            else
                err_bytes += chunk.size();
        }
    };
    const std::string child = SANDGATE_TEST_CHILD;
    const std::string line = "e SKIP-UNDER-WRAP " + std::string(40, 'e');
    RunRequest request = child_request({});
    request.argv = {
        "/bin/sh", "-c",
        child + " spew out 20000000 & " + child + " lines err 30000 '" + line + "'; wait"};
    Recorder recorder;
    request.observer = &recorder;
    RunResult result = sandbox::run(request);
    CHECK(result.exit_code == 0);
    CHECK(result.out.bytes == 20000000);
    CHECK(recorder.out == spew_stream(0, 20000000));
    CHECK(result.out.tail == spew_stream(20000000 - sandbox::k_tail_bytes, sandbox::k_tail_bytes));
    CHECK(result.err.bytes == 30000 * (line.size() + 1));
    CHECK(recorder.err_bytes == result.err.bytes);
    CHECK(result.skip_markers == 30000);
}

TEST_CASE("stdin: text is fed, large input does not deadlock, unread input is fine") {
    RunRequest cat = child_request({"cat"});
    cat.stdin_text = "hello\nworld";
    RunResult result = sandbox::run(cat);
    CHECK(result.out.head == "hello\nworld");

    // 1,000,000 bytes in while the child writes them back: both pipes fill unless stdin is
    // fed from the same poll loop that drains stdout.
    std::string big(sandbox::k_max_stdin_bytes, 'z');
    cat.stdin_text = big;
    cat.output_limit = sandbox::k_max_stdin_bytes;
    result = sandbox::run(cat);
    CHECK(result.out.bytes == big.size());
    CHECK(result.out.head == big);

    RunRequest ignores = child_request({"exit", "0"});
    ignores.stdin_text = big;  // the child exits without reading: no SIGPIPE for us
    CHECK(sandbox::run(ignores).exit_code == 0);

    RunRequest no_stdin = child_request({"cat"});
    result = sandbox::run(no_stdin);  // /dev/null: EOF at once
    CHECK(result.exit_code == 0);
    CHECK(result.out.bytes == 0);
}

TEST_CASE("the child gets the allowlist and what the request adds, never our variables") {
    const std::string secret = tests::unique_marker();
    ::setenv("SANDGATE_TEST_SECRET", secret.c_str(), 1);
    ::setenv("LC_SANDGATE_TEST", "kept", 1);
    RunRequest request = child_request({"env"});
    request.env =
        sandbox::child_environment(sandbox::current_environment(), {"HOME"}, {{"EXTRA", "1"}});
    RunResult result = sandbox::run(request);
    const std::string& env = result.out.head;
    CHECK(env.find(secret) == std::string::npos);
    CHECK(env.find("SANDGATE_TEST_SECRET") == std::string::npos);
    CHECK(env.find("EXTRA=1\n") != std::string::npos);
    CHECK(env.find("LC_SANDGATE_TEST=kept\n") != std::string::npos);
    if (const char* home = std::getenv("HOME"))
        CHECK(env.find(std::string("HOME=") + home + "\n") != std::string::npos);
    if (const char* path = std::getenv("PATH"))
        CHECK(env.find(std::string("PATH=") + path + "\n") != std::string::npos);
    ::unsetenv("SANDGATE_TEST_SECRET");
    ::unsetenv("LC_SANDGATE_TEST");
}

TEST_CASE("the child has only fds 0-2, its own session and the requested cwd") {
    const CgroupUse cgroup = GENERATE(CgroupUse::automatic, CgroupUse::never);
    common::Fd leak(::open("/dev/null", O_RDONLY));  // deliberately without O_CLOEXEC
    REQUIRE(leak.valid());
    RunResult fds = sandbox::run(child_request({"fds"}, cgroup));
    CHECK(fds.out.head == "0\n1\n2\n");

    RunResult sid = sandbox::run(child_request({"sid"}, cgroup));
    int pid = 0, session = 0, group = 0;
    REQUIRE(std::sscanf(sid.out.head.c_str(), "%d %d %d", &pid, &session, &group) == 3);
    CHECK(session == pid);
    CHECK(group == pid);

    const auto dir = tests::make_temp_dir("cwd");
    RunRequest pwd = child_request({"pwd"}, cgroup);
    pwd.cwd = dir;
    CHECK(sandbox::run(pwd).out.head == std::filesystem::canonical(dir).string() + "\n");
}

TEST_CASE("no descendant survives the main child: double fork, held pipe, stopped grandchild") {
    const CgroupUse cgroup = GENERATE(CgroupUse::automatic, CgroupUse::never);
    const std::string marker = tests::unique_marker();
    RunResult daemon = sandbox::run(child_request({"double-fork", marker}, cgroup));
    CHECK(daemon.exit_code == 0);
    CHECK(daemon.err.bytes > 0);  // the grandchild's pid: it did start
    CHECK(tests::processes_with(marker).empty());

    const std::string holder = tests::unique_marker();
    RunResult held = sandbox::run(child_request({"hold-pipe", holder}, cgroup));
    CHECK(held.exit_code == 0);
    CHECK(held.out.head == "parent done\n");
    CHECK(tests::processes_with(holder).empty());

    const std::string stopped = tests::unique_marker();
    RunResult stop = sandbox::run(child_request({"stop-child", stopped}, cgroup));
    CHECK(stop.exit_code == 0);
    CHECK(tests::processes_with(stopped).empty());
}

TEST_CASE("timeout: TERM to the whole tree, KILL after the grace, 124") {
    const CgroupUse cgroup = GENERATE(CgroupUse::automatic, CgroupUse::never);
    const std::string marker = tests::unique_marker();
    RunRequest stubborn = child_request({"ignore-term", marker}, cgroup);
    stubborn.timeout = 500ms;
    stubborn.kill_grace = 500ms;
    RunResult result = sandbox::run(stubborn);
    CHECK(result.timed_out);
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::timeout);
    CHECK(result.signal == 9);
    CHECK(result.exit_status() == 124);
    CHECK(result.out.head == "ready\n");  // output before the timeout is kept
    CHECK(tests::processes_with(marker).empty());

    // The main child dies of TERM; its TERM-ignoring grandchild must still go, long before
    // this grace (a bug would hang the test for 10 minutes rather than pass it).
    const std::string tree = tests::unique_marker();
    RunRequest polite = child_request({"term-tree", tree}, cgroup);
    polite.timeout = 500ms;
    polite.kill_grace = 600s;
    result = sandbox::run(polite);
    CHECK(result.timed_out);
    CHECK(result.signal == 15);
    CHECK(result.exit_status() == 124);
    CHECK(tests::processes_with(tree).empty());

    RunRequest stopped = child_request({"stop-self"}, cgroup);
    stopped.timeout = 500ms;
    stopped.kill_grace = 600s;  // SIGCONT lets the TERM in
    result = sandbox::run(stopped);
    CHECK(result.timed_out);
    CHECK(result.signal == 15);
}

TEST_CASE("a cancel token stops the whole tree like a timeout, and nothing starts once fired") {
    const CgroupUse cgroup = GENERATE(CgroupUse::automatic, CgroupUse::never);
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    const std::string marker = tests::unique_marker();
    RunRequest request = child_request({"term-tree", marker}, cgroup);
    request.kill_grace = 500ms;  // the grandchild ignores TERM
    request.cancel = &*token;
    std::thread canceller([&] {
        for (int i = 0; i < 3000 && tests::processes_with(marker).size() < 2; ++i)
            std::this_thread::sleep_for(10ms);
        token->cancel();
    });
    RunResult result = sandbox::run(request);
    canceller.join();
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::cancelled);
    CHECK(result.exit_status() == sandbox::k_cancelled_exit_status);
    CHECK(result.signal == 15);
    CHECK_FALSE(result.timed_out);
    CHECK(tests::processes_with(marker).empty());

    const std::string never = tests::unique_marker();
    RunRequest late = child_request({"forever", never}, cgroup);
    late.cancel = &*token;
    result = sandbox::run(late);
    REQUIRE(result.error);
    CHECK(result.error->kind == RunErrorKind::cancelled);
    CHECK_FALSE(result.exit_code);
    CHECK(tests::processes_with(never).empty());
}

TEST_CASE("the cgroup mechanism is used where a writable cgroup2 exists, and removed after") {
    SKIP_UNDER_WRAP("no writable cgroup inside the wrap");
    REQUIRE(sandbox::Cgroup::base());
    const RunResult result = sandbox::run(child_request({"exit", "0"}));
    CHECK(result.tree_kill == sandbox::TreeKill::cgroup);
    for (const auto& entry : std::filesystem::directory_iterator(*sandbox::Cgroup::base()))
        CHECK(entry.path().filename().string().find("sandgate-" + std::to_string(::getpid()) +
                                                    "-") == std::string::npos);
}

TEST_CASE("concurrent runs in one process keep their trees apart") {
    const CgroupUse cgroup = GENERATE(CgroupUse::automatic, CgroupUse::never);
    constexpr int k_runs = 4;
    std::vector<std::string> markers;
    std::vector<RunResult> results(k_runs);
    for (int i = 0; i < k_runs; ++i) markers.push_back(tests::unique_marker());
    std::vector<std::thread> threads;
    for (int i = 0; i < k_runs; ++i)
        threads.emplace_back([&, i] {
            results[static_cast<std::size_t>(i)] = sandbox::run(
                child_request({"double-fork", markers[static_cast<std::size_t>(i)]}, cgroup));
        });
    for (auto& thread : threads) thread.join();
    for (int i = 0; i < k_runs; ++i) {
        CHECK(results[static_cast<std::size_t>(i)].exit_code == 0);
        CHECK(tests::processes_with(markers[static_cast<std::size_t>(i)]).empty());
    }
}

// The per-run reaper is made by a raw clone3 while other threads may hold glibc's locks
// (malloc arenas, the atfork list); it once forked through glibc and hung forever on such a
// lock. Threads that allocate without pause make that window wide; a regression hangs here.
TEST_CASE("runs started while other threads allocate never deadlock the reaper") {
    std::atomic<bool> stop{false};
    std::vector<std::thread> allocators;
    for (int i = 0; i < 2; ++i)
        allocators.emplace_back([&stop] {
            while (!stop.load(std::memory_order_relaxed)) {
                std::vector<std::string> junk(64, std::string(512, 'x'));
                junk.clear();
            }
        });
    int succeeded = 0;
    for (int i = 0; i < 60; ++i)
        if (sandbox::run(child_request({"exit", "0"}, CgroupUse::never)).exit_code == 0)
            ++succeeded;
    stop = true;
    for (auto& thread : allocators) thread.join();
    CHECK(succeeded == 60);
}

TEST_CASE("memory stays bounded whatever the output size") {
    RunRequest request = child_request({"spew", "out", "300000000"});
    RunResult result = sandbox::run(request);
    CHECK(result.out.bytes == 300000000);
    CHECK(result.out.head.size() == sandbox::k_default_output_limit);
    CHECK(result.out.tail.size() == sandbox::k_tail_bytes);
    const std::string status = tests::read_file("/proc/self/status");
    const std::size_t at = status.find("VmHWM:");
    REQUIRE(at != std::string::npos);
    const long hwm_kb = tests::to_number<long>(status.substr(at + 6)).value_or(-1);
    CHECK(hwm_kb > 0);
    CHECK(hwm_kb < 64 * 1024);  // 300 MB went through; far less was ever resident
}

TEST_CASE("the survivor check itself sees a live marked process") {
    const std::string marker = tests::unique_marker();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::execl(SANDGATE_TEST_CHILD, "sandgate-test-child", "forever", marker.c_str(), nullptr);
        ::_exit(127);
    }
    bool seen = false;
    for (int i = 0; i < 500 && !seen; ++i) {  // until it has exec'd
        seen = !tests::processes_with(marker).empty();
        if (!seen) std::this_thread::sleep_for(10ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    CHECK(seen);
    CHECK(tests::processes_with(marker).empty());
}
