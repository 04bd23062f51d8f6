#pragma once
// The agent's HTTP API in a test: an API on a unix socket with a queue and a sandbox manager in a
// temp dir (Fixture), one HTTP request through libcurl (http), and a JSON body parsed with
// simdjson (parse). For tests/unit/agent/test_api.cpp and tests/unit/agent/test_api_sandboxes.cpp.

#include <curl/curl.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agent/api/api.hpp"
#include "agent/api/http_server.hpp"
#include "agent/sandboxes/sandbox_manager.hpp"
#include "agent/store/job_store.hpp"
#include "common/unix_socket.hpp"
#include "tests/support/temp_dir.hpp"

namespace tests::api {

inline constexpr const char* k_sha = "0123456789abcdef0123456789abcdef01234567";

struct CurlDeleter {
    void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct ListDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

struct Reply {
    long status = 0;
    std::string body;
};

inline std::size_t append(char* data, std::size_t size, std::size_t count, void* out) {
    static_cast<std::string*>(out)->append(data, size * count);
    return size * count;
}

// One HTTP request, to a unix socket (when `socket` is set) or a 127.0.0.1 URL.
inline Reply http(const std::string& method, const std::string& url, const std::string& body = "",
                  std::vector<std::string> headers = {}, const std::filesystem::path& socket = {}) {
    std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
    std::unique_ptr<curl_slist, ListDeleter> list;
    for (const auto& header : headers)
        list.reset(curl_slist_append(list.release(), header.c_str()));
    Reply reply;
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    if (!socket.empty()) curl_easy_setopt(curl.get(), CURLOPT_UNIX_SOCKET_PATH, socket.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
    if (method == "POST") {
        curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    }
    curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, list.get());
    curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &reply.body);
    curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT, 120L);
    REQUIRE(curl_easy_perform(curl.get()) == CURLE_OK);
    curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
}

// The API's parts: a queue and a sandbox manager with their files in a directory, and the API
// served on a listener.
struct ApiStack {
    std::unique_ptr<agent::JobQueue> queue;
    std::unique_ptr<agent::SandboxManager> sandboxes;
    std::unique_ptr<agent::Api> api;
    std::unique_ptr<agent::HttpServer> server;

    void open(const std::filesystem::path& dir) {
        using namespace std::chrono_literals;
        queue = std::move(*agent::open_sqlite_queue(dir / "q.db"));
        sandboxes = std::make_unique<agent::SandboxManager>(
            agent::ManagerConfig{dir / "state", SANDGATE_BINARY, queue.get(), 30s});
    }
    // Job logs go to `dir`/logs; request bodies up to `max_body` bytes.
    void serve(const std::filesystem::path& dir, agent::ApiConfig config,
               common::Expected<common::Fd> listener, std::size_t max_body) {
        config.log_dir = dir / "logs";
        api = std::make_unique<agent::Api>(std::move(config), *queue, *sandboxes);
        REQUIRE(listener);
        auto started = agent::HttpServer::start(
            std::move(*listener), [this](const agent::HttpRequest& r) { return api->handle(r); },
            max_body);
        REQUIRE(started);
        server = std::move(*started);
    }
};

// An API on a unix socket with a queue and a sandbox manager in a temp dir.
struct Fixture : ApiStack {
    std::filesystem::path dir = tests::make_temp_dir("api");
    std::filesystem::path socket = dir / "run" / "api.sock";

    explicit Fixture(agent::ApiConfig config = {}) {
        open(dir);
        config.sandbox_policy.mode = sandbox::SandboxMode::off;  // bwrap: see test_broker
        std::filesystem::create_directories(socket.parent_path());
        ::chmod(socket.parent_path().c_str(), 0700);
        serve(dir, std::move(config), common::listen_unix(socket), 8 << 20);
    }
    Reply call(const std::string& method, const std::string& path, const std::string& body = "",
               std::vector<std::string> headers = {}) {
        return http(method, "http://localhost" + path, body, std::move(headers), socket);
    }
};

inline simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& body) {
    simdjson::dom::element doc;
    REQUIRE(parser.parse(body).get(doc) == simdjson::SUCCESS);
    return doc;
}

}  // namespace tests::api
