// SandboxManager (sandbox_manager.hpp), continued: reaping the sandboxes of a previous life.
// Tested with the rest of the manager in tests/unit/sandbox/test_broker.cpp.
#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "agent/sandboxes/sandbox_dirs.hpp"
#include "agent/sandboxes/sandbox_manager.hpp"

namespace agent {

namespace {

bool process_alive(pid_t pid) {
    return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

}  // namespace

std::size_t SandboxManager::reap_stale() {
    const auto root = m_config.state_dir / "sandboxes";
    std::error_code ec;
    std::size_t reaped = 0;
    // trusted path: the agent's own list of sandboxes (each removed below without following)
    for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
        const auto id = entry.path().filename().string();
        if (find(id) || entry.symlink_status(ec).type() != std::filesystem::file_type::directory)
            continue;
        simdjson::dom::parser parser;
        simdjson::dom::element meta;
        std::int64_t owner = 0;
        std::filesystem::path socket = entry.path() / "sock" / "broker.sock";
        if (parser.load((entry.path() / "meta.json").string()).get(meta) == simdjson::SUCCESS) {
            if (meta["owner_pid"].get(owner) != simdjson::SUCCESS) owner = 0;
            std::string_view recorded;
            if (meta["socket"].get(recorded) == simdjson::SUCCESS) socket = recorded;
        }
        // Another live agent sharing this state directory keeps its sandboxes.
        if (owner != 0 && owner != ::getpid() && process_alive(static_cast<pid_t>(owner))) continue;
        kill_stale_broker(socket);
        remove_tree(entry.path());
        // A socket directory of its own under /tmp (a deep state directory) goes too.
        if (socket.parent_path().string().starts_with(k_short_socket_prefix))
            remove_tree(socket.parent_path());
        ++reaped;
    }
    return reaped;
}

// A broker of a previous life may outlive its agent when the wrap did not die with it: find
// it by its socket path on its command line and kill it.
void SandboxManager::kill_stale_broker(const std::filesystem::path& socket) {
    std::error_code ec;
    for (const auto& proc :
         std::filesystem::directory_iterator("/proc", ec)) {  // trusted path: /proc
        const auto name = proc.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const std::string cmdline = read_small_file(proc.path() / "cmdline");
        if (cmdline.find(std::string("broker") + '\0') != std::string::npos &&
            cmdline.find(socket.string() + '\0') != std::string::npos) {
            pid_t pid = 0;
            const auto [end, parsed] = std::from_chars(name.data(), name.data() + name.size(), pid);
            if (parsed == std::errc() && end == name.data() + name.size() && pid > 0)
                ::kill(pid, SIGKILL);
        }
    }
}

}  // namespace agent
