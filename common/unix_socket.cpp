#include "common/unix_socket.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace common {
namespace {

Expected<sockaddr_un> address_of(const std::filesystem::path& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string text = path.string();
    if (text.empty() || text.size() >= sizeof(address.sun_path))
        return fail(ErrorKind::invalid_input, "socket path is empty or longer than " +
                                                  std::to_string(sizeof(address.sun_path) - 1) +
                                                  " bytes: " + text);
    std::memcpy(address.sun_path, text.c_str(), text.size() + 1);
    return address;
}

Expected<void> check_private_dir(const std::filesystem::path& dir) {
    struct stat info {};
    if (::lstat(dir.c_str(), &info) != 0)
        return fail(ErrorKind::invalid_input, errno_message(dir.string()));
    if (!S_ISDIR(info.st_mode) || info.st_uid != ::geteuid() || (info.st_mode & 077) != 0)
        return fail(ErrorKind::invalid_input,
                    dir.string() + ": the socket's directory must be ours with mode 0700");
    return {};
}

// Waits until fd is ready for `events` or the deadline passes.
Expected<void> wait_for(int fd, short events,
                        std::optional<std::chrono::steady_clock::time_point> deadline) {
    while (true) {
        int timeout_ms = -1;
        if (deadline) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                *deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return fail(ErrorKind::timeout, "socket: deadline passed");
            timeout_ms = static_cast<int>(std::min<long long>(left.count() + 1, 1 << 30));
        }
        pollfd item{fd, events, 0};
        const int ready = ::poll(&item, 1, timeout_ms);
        if (ready > 0) return {};
        if (ready < 0 && errno != EINTR) return fail(ErrorKind::permanent, errno_message("poll"));
    }
}

Expected<void> read_exact(int fd, char* data, std::size_t size,
                          std::optional<std::chrono::steady_clock::time_point> deadline) {
    // recv first and poll only when nothing is there: a frame's body usually arrives with its
    // header, and a poll per read is a system call per read.
    std::size_t done = 0;
    while (done < size) {
        const ssize_t got = ::recv(fd, data + done, size - done, MSG_DONTWAIT);
        if (got == 0) return fail(ErrorKind::permanent, "socket: peer closed the connection");
        if (got < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) return fail(ErrorKind::permanent, errno_message("recv"));
            if (auto ready = wait_for(fd, POLLIN, deadline); !ready) return ready;
            continue;
        }
        done += static_cast<std::size_t>(got);
    }
    return {};
}

}  // namespace

Expected<Fd> listen_unix(const std::filesystem::path& path) {
    auto address = SANDGATE_TRY(address_of(path));
    SANDGATE_CHECK(check_private_dir(path.parent_path()));
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return fail(ErrorKind::permanent, errno_message("socket"));
    ::unlink(path.c_str());  // a socket left by a previous life; the dir is ours alone
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
        return fail(ErrorKind::permanent, errno_message("bind " + path.string()));
    if (::chmod(path.c_str(), 0600) != 0)
        return fail(ErrorKind::permanent, errno_message("chmod " + path.string()));
    if (::listen(fd.get(), 16) != 0) return fail(ErrorKind::permanent, errno_message("listen"));
    return fd;
}

Expected<Fd> connect_unix(const std::filesystem::path& path) {
    auto address = SANDGATE_TRY(address_of(path));
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return fail(ErrorKind::permanent, errno_message("socket"));
    while (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
        if (errno == EINTR) continue;
        const auto kind = errno == ENOENT || errno == ECONNREFUSED ? ErrorKind::unavailable
                                                                   : ErrorKind::permanent;
        return fail(kind, errno_message("connect " + path.string()));
    }
    return fd;
}

Expected<PeerCredentials> peer_credentials(int fd) {
    ucred cred{};
    socklen_t size = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0)
        return fail(ErrorKind::permanent, errno_message("SO_PEERCRED"));
    return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

Expected<void> write_frame(int fd, std::string_view body) {
    if (body.size() > 0xffffffffU) return fail(ErrorKind::invalid_input, "frame too large");
    const auto size = static_cast<std::uint32_t>(body.size());
    const std::array<char, 4> header = {static_cast<char>(size >> 24),
                                        static_cast<char>(size >> 16), static_cast<char>(size >> 8),
                                        static_cast<char>(size)};
    std::string frame(header.begin(), header.end());
    frame.append(body);
    std::size_t done = 0;
    while (done < frame.size()) {
        const ssize_t put = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
        if (put < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                if (auto ready = wait_for(fd, POLLOUT, std::nullopt); !ready) return ready;
                continue;
            }
            return fail(ErrorKind::permanent, errno_message("send"));
        }
        done += static_cast<std::size_t>(put);
    }
    return {};
}

Expected<std::string> read_frame(int fd, std::size_t max_bytes,
                                 std::optional<std::chrono::steady_clock::time_point> deadline) {
    std::array<unsigned char, 4> header{};
    SANDGATE_CHECK(read_exact(fd, reinterpret_cast<char*>(header.data()), header.size(), deadline));
    const std::size_t size = (std::size_t{header[0]} << 24) | (std::size_t{header[1]} << 16) |
                             (std::size_t{header[2]} << 8) | std::size_t{header[3]};
    if (size > max_bytes)
        return fail(ErrorKind::invalid_input, "frame of " + std::to_string(size) +
                                                  " bytes exceeds the limit of " +
                                                  std::to_string(max_bytes));
    std::string body(size, '\0');
    SANDGATE_CHECK(read_exact(fd, body.data(), size, deadline));
    return body;
}

}  // namespace common
