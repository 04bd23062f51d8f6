// sandbox::CancelToken: one-shot, pollable, and linked tokens that fire with their parent
// (and only downwards), also while a run watches them.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "common/fd.hpp"
#include "sandbox/process/cancel.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/processes.hpp"

namespace {

using namespace std::chrono_literals;

bool readable(const sandbox::CancelToken& token) {
    pollfd pfd{token.fd(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 1;
}

}  // namespace

TEST_CASE("a token fires once and stays fired") {
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    CHECK_FALSE(token->cancelled());
    CHECK_FALSE(readable(*token));
    token->cancel();
    token->cancel();
    CHECK(token->cancelled());
    CHECK(readable(*token));
    CHECK(token->cancelled());
}

TEST_CASE("a linked token fires with its parent, and cancelling it leaves the parent alone") {
    auto parent = sandbox::CancelToken::create();
    REQUIRE(parent);
    auto child = sandbox::CancelToken::create_linked(*parent);
    auto sibling = sandbox::CancelToken::create_linked(*parent);
    REQUIRE(child);
    REQUIRE(sibling);
    CHECK_FALSE(child->cancelled());
    child->cancel();
    CHECK(child->cancelled());
    CHECK(readable(*child));
    CHECK_FALSE(parent->cancelled());
    CHECK_FALSE(sibling->cancelled());
    CHECK_FALSE(readable(*sibling));
    parent->cancel();
    CHECK(sibling->cancelled());
    CHECK(readable(*sibling));
}

TEST_CASE("links chain: a grandchild fires with the root") {
    auto root = sandbox::CancelToken::create();
    REQUIRE(root);
    auto child = sandbox::CancelToken::create_linked(*root);
    REQUIRE(child);
    auto grandchild = sandbox::CancelToken::create_linked(*child);
    REQUIRE(grandchild);
    CHECK_FALSE(grandchild->cancelled());
    root->cancel();
    CHECK(child->cancelled());
    CHECK(grandchild->cancelled());
}

TEST_CASE("a run watching a linked token is stopped when the parent fires mid-run") {
    auto parent = sandbox::CancelToken::create();
    REQUIRE(parent);
    auto linked = sandbox::CancelToken::create_linked(*parent);
    REQUIRE(linked);
    const std::string marker = tests::unique_marker();
    sandbox::RunRequest request;
    request.argv = {"sh", "-c", "sleep 600; : " + marker};
    request.env = {{"PATH", "/usr/bin:/bin"}};
    request.policy.mode = sandbox::SandboxMode::off;
    request.kill_grace = 600s;  // sh dies of the TERM; a broken cancel hangs the test
    request.cancel = &*linked;
    std::thread canceller([&] {
        while (tests::processes_with(marker).empty()) std::this_thread::sleep_for(10ms);
        parent->cancel();
    });
    const auto result = sandbox::run(request);
    canceller.join();
    REQUIRE(result.error);
    CHECK(result.error->kind == sandbox::RunErrorKind::cancelled);
    CHECK(tests::processes_with(marker).empty());
}

TEST_CASE("a token watching a socket fires when its peer hangs up, not when it sends") {
    int pair[2] = {-1, -1};
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
    common::Fd ours(pair[0]);
    common::Fd peer(pair[1]);
    auto parent = sandbox::CancelToken::create();
    REQUIRE(parent);
    auto plain = sandbox::CancelToken::create();
    auto linked = sandbox::CancelToken::create_linked(*parent);
    REQUIRE(plain);
    REQUIRE(linked);
    REQUIRE(plain->fire_on_hangup(ours.get()));
    REQUIRE(linked->fire_on_hangup(ours.get()));
    REQUIRE(::write(peer.get(), "GET /", 5) == 5);
    CHECK_FALSE(plain->cancelled());
    CHECK_FALSE(linked->cancelled());
    REQUIRE(::shutdown(peer.get(), SHUT_WR) == 0);
    CHECK(plain->cancelled());
    CHECK(linked->cancelled());
    CHECK(readable(*plain));
    CHECK_FALSE(parent->cancelled());  // a hang-up fires the child, never its parent

    auto unwatched = sandbox::CancelToken::create();
    REQUIRE(unwatched);
    CHECK_FALSE(unwatched->fire_on_hangup(-1));  // not an fd: an error value, not a throw
    CHECK_FALSE(unwatched->cancelled());
    unwatched->cancel();  // its own cancel still works through the watch it got
    CHECK(unwatched->cancelled());
}
