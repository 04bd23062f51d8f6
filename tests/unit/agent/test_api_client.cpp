// agent/api_client: the cancellable request against a raw loopback server (what the CLI does
// on Ctrl-C: wait for the answer, or hang up), error lines, and how the target is chosen.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "agent/cli/api_client.hpp"
#include "common/fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

// One loopback listener on a port the kernel picked.
struct Listener {
    common::Fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    std::uint16_t port = 0;

    Listener() {
        REQUIRE(fd);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) ==
                0);
        REQUIRE(::listen(fd.get(), 4) == 0);
        socklen_t size = sizeof(address);
        REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &size) == 0);
        port = ntohs(address.sin_port);
    }
    agent::ApiTarget target() const {
        agent::ApiTarget target;
        target.url = "http://127.0.0.1:" + std::to_string(port);
        return target;
    }
};

// Accepts one connection and reads its request head (a GET has no body).
common::Fd accept_request(const Listener& listener, std::string* head) {
    common::Fd client(::accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(client);
    char buffer[4096];
    while (head->find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(client.get(), buffer, sizeof(buffer));
        REQUIRE(n > 0);
        head->append(buffer, static_cast<std::size_t>(n));
    }
    return client;
}

}  // namespace

TEST_CASE("a cancelled request hangs up when told to: the server reads EOF") {
    Listener listener;
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    std::promise<void> got_request;
    std::string head;
    ssize_t after = -1;
    std::thread server([&] {
        common::Fd client = accept_request(listener, &head);
        got_request.set_value();
        char byte = 0;
        after = ::read(client.get(), &byte, 1);  // blocks until the client hangs up
    });
    std::thread canceller([&] {
        got_request.get_future().wait();
        token->cancel();
    });
    int asked = 0;
    auto response =
        agent::api_request_cancellable(listener.target(), "GET", "/v1/slow", "", *token, [&] {
            ++asked;
            return agent::AfterCancel::hang_up;
        });
    canceller.join();
    server.join();
    REQUIRE_FALSE(response);
    CHECK(response.error().kind == common::ErrorKind::transient);
    CHECK(asked == 1);
    CHECK(after == 0);
    CHECK(head.starts_with("GET /v1/slow HTTP/1.1\r\n"));
}

TEST_CASE("a cancelled request told to wait gets its answer, and on_cancel runs once") {
    Listener listener;
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    std::promise<void> got_request, cancel_asked;
    std::string head;
    std::thread server([&] {
        common::Fd client = accept_request(listener, &head);
        got_request.set_value();
        cancel_asked.get_future().wait();
        const std::string answer =
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\ndone";
        REQUIRE(::write(client.get(), answer.data(), answer.size()) ==
                static_cast<ssize_t>(answer.size()));
    });
    std::thread canceller([&] {
        got_request.get_future().wait();
        token->cancel();
    });
    int asked = 0;
    auto response =
        agent::api_request_cancellable(listener.target(), "POST", "/v1/x", "{}", *token, [&] {
            if (++asked == 1) cancel_asked.set_value();
            return agent::AfterCancel::wait_for_answer;
        });
    canceller.join();
    server.join();
    REQUIRE(response);
    CHECK(response->status == 200);
    CHECK(response->body == "done");
    CHECK(asked == 1);
}

TEST_CASE("an uncancelled request is a plain request; no listener is unavailable") {
    Listener listener;
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    std::thread server([&] {
        std::string head;
        common::Fd client = accept_request(listener, &head);
        const std::string answer =
            "HTTP/1.1 404 Not Found\r\nContent-Length: 20\r\nConnection: "
            "close\r\n\r\n{\"error\":\"no such\"}\n";
        REQUIRE(::write(client.get(), answer.data(), answer.size()) ==
                static_cast<ssize_t>(answer.size()));
    });
    auto response = agent::api_request_cancellable(listener.target(), "GET", "/", "", *token,
                                                   [] { return agent::AfterCancel::hang_up; });
    server.join();
    REQUIRE(response);
    CHECK(response->status == 404);
    CHECK(agent::api_error_line(*response) == "HTTP 404: no such");

    agent::ApiTarget nowhere;
    nowhere.socket = (tests::make_temp_dir("api-client") / "none.sock").string();
    auto unreachable = agent::api_request(nowhere, "GET", "/v1/jobs");
    REQUIRE_FALSE(unreachable);
    CHECK(unreachable.error().kind == common::ErrorKind::unavailable);
    CHECK(unreachable.error().message.starts_with("cannot reach the agent at " + nowhere.socket +
                                                  ": "));
}

TEST_CASE("error lines: the API's message, else the body's first line, else the status") {
    CHECK(agent::api_error_line({409, "{\"error\":\"busy\\nnow\"}\n"}) == "HTTP 409: busy now");
    CHECK(agent::api_error_line({502, "Bad gateway\r\nmore\n"}) == "HTTP 502: Bad gateway");
    CHECK(agent::api_error_line({500, ""}) == "HTTP 500");
    CHECK(agent::api_error_line({400, "{\"other\":1}"}) == "HTTP 400: {\"other\":1}");
}

TEST_CASE("the target: --url with its token file, else --socket, else the config's socket") {
    const auto dir = tests::make_temp_dir("api-target");
    tests::write_file(dir / "token", "secret-token\n");
    std::filesystem::permissions(dir / "token", std::filesystem::perms::owner_read);
    agent::ApiTargetOptions options;
    options.url = "http://127.0.0.1:1234";
    options.token_file = (dir / "token").string();
    options.socket = "/ignored.sock";
    auto url = agent::resolve_api_target(options);
    REQUIRE(url);
    CHECK(url->token == "secret-token");
    CHECK(url->socket.empty());
    std::filesystem::permissions(dir / "token", std::filesystem::perms::all);
    auto loose = agent::resolve_api_target(options);
    REQUIRE_FALSE(loose);
    CHECK(loose.error().message.find((dir / "token").string()) != std::string::npos);

    options.url.clear();
    auto socket = agent::resolve_api_target(options);
    REQUIRE(socket);
    CHECK(socket->socket == "/ignored.sock");
    CHECK(socket->token.empty());

    options.socket.clear();
    tests::write_file(dir / "agent.yaml",
                      "agent:\n  state_dir: " + (dir / "state").string() + "\n");
    options.config_path = (dir / "agent.yaml").string();
    auto configured = agent::resolve_api_target(options);
    REQUIRE(configured);
    CHECK(configured->socket == (dir / "state" / "agent" / "run" / "api.sock").string());
    options.config_path = (dir / "missing.yaml").string();
    CHECK_FALSE(agent::resolve_api_target(options));
}
