#pragma once
// Owner-only unix stream sockets and length-prefixed frames over them: the transport of the
// job-sandbox broker (broker.hpp). A frame is a 4-byte big-endian length and that many bytes.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace common {

// Binds and listens on `path` (replacing a stale socket file there), mode 0600. The parent
// directory must exist and be owned by us with mode 0700: otherwise invalid_input, because
// another user could then reach or swap the socket.
Expected<Fd> listen_unix(const std::filesystem::path& path);

// Connects to `path`; unavailable when nothing listens there.
Expected<Fd> connect_unix(const std::filesystem::path& path);

struct PeerCredentials {
    pid_t pid = 0;  // in our pid namespace (0 when the peer is outside it)
    uid_t uid = 0;
    gid_t gid = 0;
};
Expected<PeerCredentials> peer_credentials(int fd);

// Writes one frame whole (EINTR and short writes handled; SIGPIPE suppressed).
Expected<void> write_frame(int fd, std::string_view body);

// Reads one frame of at most `max_bytes`; nullopt deadline waits forever. timeout when the
// deadline passes; invalid_input when the length exceeds max_bytes; permanent on EOF.
Expected<std::string> read_frame(int fd, std::size_t max_bytes,
                                 std::optional<std::chrono::steady_clock::time_point> deadline);

}  // namespace common
