// Directories of the persistent job sandboxes (see sandbox_dirs.hpp).
#include "agent/sandboxes/sandbox_dirs.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/fd.hpp"
#include "sandbox/access/safe_access.hpp"

namespace agent {

common::Expected<void> make_private_dir(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);  // trusted path: the agent's own state
    if (ec) return common::fail(common::ErrorKind::permanent, dir.string() + ": " + ec.message());
    if (::chmod(dir.c_str(), 0700) != 0)
        return common::fail(common::ErrorKind::permanent,
                            common::errno_message("chmod " + dir.string()));
    return {};
}

// Removes a tree through the safe-access module (sandbox/access/safe_access.hpp): links unlinked as
// entries, directories entered only through descriptors opened beneath, owner rwx restored on
// directories a step closed.
void remove_tree(const std::filesystem::path& dir) {
    if (auto removed = sandbox::remove_tree(dir); !removed)
        spdlog::warn("sandbox: cannot remove {}: {}", dir.string(), removed.error().message);
}

std::string read_small_file(const std::filesystem::path& path) {
    common::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));  // trusted path: /proc/PID files
    std::string text;
    char buffer[4096];
    ssize_t got = 0;
    while (fd && (got = ::read(fd.get(), buffer, sizeof(buffer))) > 0 && text.size() < 65536)
        text.append(buffer, static_cast<std::size_t>(got));
    return text;
}

// A socket path must fit sockaddr_un; a deep state directory (a test's, a nested TMPDIR) does
// not leave room, so the socket then lives in a private directory of its own under /tmp.
constexpr std::size_t k_max_socket_path = sizeof(sockaddr_un::sun_path) - 1;

common::Expected<std::filesystem::path> socket_dir_for(const std::filesystem::path& box_dir) {
    auto dir = box_dir / "sock";
    if ((dir / "broker.sock").native().size() <= k_max_socket_path) return dir;
    std::string pattern = std::string(k_short_socket_prefix) + "XXXXXX";
    // trusted path: a new directory of the host's /tmp, mode 0700
    if (::mkdtemp(pattern.data()) == nullptr)
        return common::fail(common::ErrorKind::permanent,
                            common::errno_message("mkdtemp " + pattern));
    return std::filesystem::path(pattern);
}

}  // namespace agent
