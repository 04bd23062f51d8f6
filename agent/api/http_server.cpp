#include "agent/api/http_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <nettle/memops.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>

#include "common/sha256.hpp"

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;

struct HttpServer::State {
    HttpHandler handler;
    std::size_t max_body = 0;
    std::atomic<bool> stopping{false};
    MHD_Daemon* daemon = nullptr;
    common::Fd listener;  // MHD does not close a socket it was given
};

namespace {

constexpr std::size_t k_stream_block = 64 * 1024;
constexpr unsigned k_connection_timeout_s = 300;

// Per-connection state across the access handler's calls (headers, then body chunks).
struct Pending {
    HttpRequest request;
    bool too_large = false;
};

// A streamed body's producer, with leftovers of a chunk larger than MHD's buffer.
struct Streaming {
    BodyStream next;
    std::string buffer;
    std::size_t offset = 0;
    const std::atomic<bool>* stopping = nullptr;
};

MHD_Result collect(void* cls, MHD_ValueKind kind, const char* key, const char* value) {
    auto* request = static_cast<HttpRequest*>(cls);
    if (!key) return MHD_YES;
    std::string name(key);
    if (kind == MHD_HEADER_KIND) {
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        request->headers[name] = value ? value : "";
    } else if (kind == MHD_GET_ARGUMENT_KIND) {
        request->query[name] = value ? value : "";
    }
    return MHD_YES;
}

ssize_t stream_reader(void* cls, std::uint64_t, char* buf, std::size_t max) {
    auto* streaming = static_cast<Streaming*>(cls);
    while (streaming->offset >= streaming->buffer.size()) {
        if (streaming->stopping->load()) return MHD_CONTENT_READER_END_OF_STREAM;
        auto chunk = streaming->next();
        if (!chunk) return MHD_CONTENT_READER_END_OF_STREAM;
        streaming->buffer = std::move(*chunk);
        streaming->offset = 0;
    }
    const std::size_t n = std::min(max, streaming->buffer.size() - streaming->offset);
    std::memcpy(buf, streaming->buffer.data() + streaming->offset, n);
    streaming->offset += n;
    return static_cast<ssize_t>(n);
}

void stream_free(void* cls) {
    delete static_cast<Streaming*>(cls);
}

MHD_Result send(MHD_Connection* connection, HttpResponse response,
                const std::atomic<bool>& stopping) {
    MHD_Response* mhd = nullptr;
    if (response.stream) {
        auto* streaming = new Streaming{std::move(response.stream), {}, 0, &stopping};
        mhd = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, k_stream_block, stream_reader,
                                                streaming, stream_free);
    } else {
        mhd = MHD_create_response_from_buffer(response.body.size(), response.body.data(),
                                              MHD_RESPMEM_MUST_COPY);
    }
    if (!mhd) return MHD_NO;
    MHD_add_response_header(mhd, "Content-Type", response.content_type.c_str());
    for (const auto& [name, value] : response.headers)
        MHD_add_response_header(mhd, name.c_str(), value.c_str());
    const auto result = MHD_queue_response(connection, static_cast<unsigned>(response.status), mhd);
    MHD_destroy_response(mhd);
    return result;
}

MHD_Result access(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char*, const char* upload_data, std::size_t* upload_size, void** con_cls) {
    auto* state = static_cast<HttpServer::State*>(cls);
    auto* pending = static_cast<Pending*>(*con_cls);
    if (!pending) {  // first call: headers only
        pending = new Pending;
        pending->request.method = method;
        pending->request.path = url;
        MHD_get_connection_values(connection, MHD_HEADER_KIND, collect, &pending->request);
        MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, collect, &pending->request);
        // One thread per connection: while the handler runs, nothing else reads this socket.
        if (const auto* info =
                MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD))
            pending->request.connection_fd = info->connect_fd;
        *con_cls = pending;
        return MHD_YES;
    }
    if (*upload_size > 0) {  // a body chunk
        if (pending->request.body.size() + *upload_size > state->max_body)
            pending->too_large = true;
        else
            pending->request.body.append(upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (pending->too_large) {
        HttpResponse response{
            413, "application/json", R"({"error":"request body too large"})", {}, {}};
        return send(connection, std::move(response), state->stopping);
    }
    return send(connection, state->handler(pending->request), state->stopping);
}

void completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    delete static_cast<Pending*>(*con_cls);
    *con_cls = nullptr;
}

}  // namespace

HttpServer::HttpServer(std::unique_ptr<State> state) : m_state(std::move(state)) {}

HttpServer::~HttpServer() {
    m_state->stopping = true;
    if (m_state->daemon) MHD_stop_daemon(m_state->daemon);
}

bool HttpServer::stopping() const {
    return m_state->stopping;
}

Expected<std::unique_ptr<HttpServer>> HttpServer::start(common::Fd listener, HttpHandler handler,
                                                        std::size_t max_body) {
    auto state = std::make_unique<State>();
    state->handler = std::move(handler);
    state->max_body = max_body;
    state->listener = std::move(listener);
    const unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                           MHD_USE_POLL | MHD_USE_ERROR_LOG;
    state->daemon =
        MHD_start_daemon(flags, 0, nullptr, nullptr, access, state.get(), MHD_OPTION_LISTEN_SOCKET,
                         state->listener.get(), MHD_OPTION_NOTIFY_COMPLETED, completed, nullptr,
                         MHD_OPTION_CONNECTION_TIMEOUT, k_connection_timeout_s, MHD_OPTION_END);
    if (!state->daemon)
        return fail(ErrorKind::permanent, "the HTTP server (libmicrohttpd) did not start");
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(state)));
}

Expected<common::Fd> listen_loopback(std::uint16_t port, std::uint16_t* bound) {
    common::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return fail(ErrorKind::permanent, common::errno_message("socket"));
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
        return fail(ErrorKind::unavailable,
                    common::errno_message("bind 127.0.0.1:" + std::to_string(port)));
    if (::listen(fd.get(), 64) != 0)
        return fail(ErrorKind::permanent, common::errno_message("listen"));
    socklen_t size = sizeof(address);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &size);
    if (bound) *bound = ntohs(address.sin_port);
    return fd;
}

bool bearer_matches(std::string_view authorization, std::string_view token) {
    if (token.empty()) return false;
    const std::string expected = "Bearer " + std::string(token);
    // Digests of equal length, compared in constant time: neither the token's length nor its
    // first differing byte shows in the timing.
    const auto want = common::sha256(expected);
    const auto got = common::sha256(authorization);
    return memeql_sec(want.data(), got.data(), want.size()) != 0;
}

}  // namespace agent
