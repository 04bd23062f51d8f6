#pragma once
// A small HTTP/1.1 server over libmicrohttpd for the agent's API. It serves on a socket that
// the caller bound (a unix socket by default, or 127.0.0.1), one thread per connection, so a
// streaming response (a followed log) may block its own connection without stalling others.
// Request bodies over max_body bytes are answered 413 before the handler sees them.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace agent {

struct HttpRequest {
    std::string method;
    std::string path;                            // without the query string
    std::map<std::string, std::string> query;    // decoded
    std::map<std::string, std::string> headers;  // names lower-cased
    std::string body;                            // raw bytes
    // The client's connection, not owned, valid while the handler runs: only to notice the
    // client hanging up (sandbox::CancelToken::fire_on_hangup); never read, written or closed.
    // -1 when unknown.
    int connection_fd = -1;
};

// A producer of streamed body chunks: returns a chunk (may be empty when nothing is ready
// yet: it is called again), or nullopt at the end of the stream. Called on the connection's
// thread; it may block briefly.
using BodyStream = std::function<std::optional<std::string>()>;

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    BodyStream stream;  // set: the body is streamed (chunked) instead
    std::map<std::string, std::string> headers;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
public:
    // Takes ownership of a listening socket. Fails when libmicrohttpd refuses it.
    static common::Expected<std::unique_ptr<HttpServer>> start(common::Fd listener,
                                                               HttpHandler handler,
                                                               std::size_t max_body);
    ~HttpServer();  // stops accepting, ends streams, joins every connection thread
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;
    bool stopping() const;

    struct State;

private:
    explicit HttpServer(std::unique_ptr<State> state);
    std::unique_ptr<State> m_state;
};

// A listening TCP socket on 127.0.0.1:port (0: any free port; the port is stored in *bound).
common::Expected<common::Fd> listen_loopback(std::uint16_t port, std::uint16_t* bound);

// Compares a received "Authorization" header with "Bearer " + token in constant time (both
// sides hashed with SHA-256 first, so neither length nor content leaks through timing).
bool bearer_matches(std::string_view authorization, std::string_view token);

}  // namespace agent
