// Pieces of the bwrap arm's plan: the scratch, the plan's resources, the policy's mounts, the
// layout as options.
#include "sandbox/wrap/bwrap_layout.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/temp_dir.hpp"
#include "sandbox/wrap/offline.hpp"
#include "sandbox/wrap/tool_cache.hpp"

namespace sandbox {
namespace {

// Policy binds: a host path at another path inside. System directories are never a
// destination (a bind there would replace what the wrap keeps read-only).
Expected<void> add_binds(const std::vector<Bind>& binds, std::vector<MountEntry>& entries) {
    static const char* const k_system[] = {"/usr", "/etc",  "/proc", "/dev",   "/sys",
                                           "/bin", "/sbin", "/lib",  "/lib64", "/tmp"};
    for (const auto& bind : binds) {
        auto source = checked_bind_path(bind.source, "bind source", MustExist::yes);
        if (!source) return std::unexpected(source.error());
        if (!bind.destination.is_absolute())
            return fail(ErrorKind::invalid_input,
                        "bind destination '" + bind.destination.string() + "' is not absolute");
        const auto destination = bind.destination.lexically_normal();
        for (const char* system : k_system) {
            if (destination == "/" || path_within(destination, system))
                return fail(ErrorKind::invalid_input, "bind destination '" + destination.string() +
                                                          "' would cover a system directory");
        }
        const auto kind = bind.access == Access::writable ? MountKind::bind : MountKind::ro_bind;
        entries.push_back({kind, destination, *source, {}, 2});
    }
    return {};
}

}  // namespace

BwrapResources::~BwrapResources() {
    limits.reset();  // the cgroups first: their processes are gone with the pid namespace
    // Links unlinked, never followed; closed directories a step left are opened up first.
    if (owned_scratch) (void)remove_tree(*owned_scratch);
}

Expected<Scratch> make_scratch(const Policy& policy) {
    if (policy.scratch) {
        std::error_code ec;
        // trusted path: --scratch is the caller's (a job runner makes its legs' beneath its fd)
        std::filesystem::create_directories(*policy.scratch, ec);
        auto checked =
            SANDGATE_TRY(checked_bind_path(*policy.scratch, "--scratch", MustExist::yes));
        return Scratch{checked, ScratchPlace::kept};
    }
    if (!policy.toolchain_cache)
        return Scratch{std::filesystem::path(k_private_scratch), ScratchPlace::in_wrap};
    auto made = SANDGATE_TRY(common::make_host_temp_dir("sandgate-run-"));
    auto checked = checked_bind_path(made, "scratch", MustExist::yes);
    if (!checked) {
        ::rmdir(made.c_str());
        return std::unexpected(checked.error());
    }
    return Scratch{*checked, ScratchPlace::host};
}

// The policy's own binds and masks, on top of the system layout.
Expected<void> add_policy_mounts(const RunRequest& request, const std::filesystem::path& cwd,
                                 const Scratch& scratch, std::vector<MountEntry>& entries) {
    const Policy& policy = request.policy;
    if (auto ok = refuse_host_roots(cwd, "--cwd"); !ok) return ok;
    entries.push_back({MountKind::bind, cwd, cwd, {}, 2});
    if (scratch.place != ScratchPlace::in_wrap) {
        if (auto ok = refuse_host_roots(scratch.root, "--scratch"); !ok) return ok;
        entries.push_back({MountKind::bind, scratch.root, scratch.root, {}, 2});
    }
    for (const auto& path : policy.read_only) {
        auto checked = SANDGATE_TRY(checked_bind_path(path, "--read-only", MustExist::yes));
        if (auto ok = refuse_host_roots(checked, "--read-only"); !ok) return ok;
        entries.push_back({MountKind::ro_bind, checked, checked, {}, 2});
    }
    for (const auto& path : policy.writable) {
        auto checked = SANDGATE_TRY(checked_bind_path(path, "--writable", MustExist::yes));
        if (auto ok = refuse_host_roots(checked, "--writable"); !ok) return ok;
        entries.push_back({MountKind::bind, checked, checked, {}, 2});
    }
    if (auto added = add_binds(policy.binds, entries); !added) return added;
    // The cache's allowlisted directories (offline.hpp), each read-only at its own path; never
    // the directory itself, whose other files (credentials.toml in a ~/.cargo) stay unseen.
    if (policy.toolchain_cache) {
        auto checked =
            checked_bind_path(*policy.toolchain_cache, "--toolchain-cache", MustExist::yes);
        if (!checked) return std::unexpected(checked.error());
        for (const auto& dir : toolchain_cache_binds(*checked)) {
            auto sub = checked_bind_path(dir, "--toolchain-cache", MustExist::yes);
            if (sub) entries.push_back({MountKind::ro_bind, *sub, *sub, {}, 2});
        }
    }
    // The hosted tool cache: read-only where the hosted runners have it (tool_cache.hpp).
    if (policy.tool_cache) {
        auto checked =
            SANDGATE_TRY(checked_bind_path(*policy.tool_cache, "--tool-cache", MustExist::yes));
        if (auto ok = refuse_host_roots(checked, "--tool-cache"); !ok) return ok;
        entries.push_back({MountKind::ro_bind, std::string(k_tool_cache_mount), checked, {}, 2});
    }
    // The agent's own files: masked wherever a bind would otherwise show them.
    for (const auto& path : agent_private_paths(entries)) {
        std::error_code ec;
        const auto kind =
            std::filesystem::is_directory(path, ec) ? MountKind::hide_dir : MountKind::hide_file;
        entries.push_back({kind, path, {}, {}, 1});
    }
    for (const auto& path : policy.hide) {
        auto checked = SANDGATE_TRY(checked_bind_path(path, "--hide", MustExist::no));
        std::error_code ec;
        if (!std::filesystem::exists(checked, ec)) continue;  // nothing there to hide
        const auto kind =
            std::filesystem::is_directory(checked, ec) ? MountKind::hide_dir : MountKind::hide_file;
        entries.push_back({kind, checked, {}, {}, 3});
    }
    return {};
}

Expected<std::string> portal_directory() {
    static constexpr const char* k_portal = "/tmp/.sandgate-portal";
    if (::mkdir(k_portal, 0755) != 0 && errno != EEXIST)
        return fail(ErrorKind::unavailable, errno_message(std::string("creating ") + k_portal));
    struct stat st {};
    if (::lstat(k_portal, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
        (st.st_mode & 022) != 0)
        return fail(ErrorKind::unavailable,
                    std::string(k_portal) +
                        " is not root's own directory (mode 0755): remove it; "
                        "sandgate mounts its runs' paths over it");
    return std::string(k_portal);
}

Expected<void> give_trees(const BwrapStartTrees& trees) {
    for (const auto& path : trees.writable) {
        std::vector<std::string> skip;
        for (const auto& mask : trees.masks) {
            if (mask.kind != MountKind::hide_dir && mask.kind != MountKind::hide_file) continue;
            if (auto relative = relative_beneath(path, mask.dest)) skip.push_back(*relative);
        }
        auto dir = SafeDir::open_trusted(path, path.string());
        if (!dir) {
            // A file bound writable: its own owner changes (it cannot be a link: checked).
            if (::chown(path.c_str(), trees.owner.uid, trees.owner.gid) != 0)
                return fail(ErrorKind::unavailable,
                            errno_message("giving " + path.string() + " to the sandbox"));
            continue;
        }
        if (auto ok = dir->chown_tree(trees.owner, skip); !ok) return ok;
    }
    return {};
}

// Turns the ordered layout into bwrap options; file contents come from the fds the entries name
// (memfds for generated contents, read-only fds of the files themselves for host files).
void mount_options(const std::vector<MountEntry>& entries, std::vector<std::string>& args) {
    for (const auto& entry : entries) {
        const std::string dest = entry.dest.string();
        switch (entry.kind) {
            case MountKind::ro_bind:
                args.insert(args.end(), {"--ro-bind", entry.source.string(), dest});
                break;
            case MountKind::ro_bind_try:
                args.insert(args.end(), {"--ro-bind-try", entry.source.string(), dest});
                break;
            case MountKind::bind:
                args.insert(args.end(), {"--bind", entry.source.string(), dest});
                break;
            case MountKind::hide_dir:
                args.insert(args.end(), {"--perms", "0555", "--tmpfs", dest, "--remount-ro", dest});
                break;
            case MountKind::hide_file:
                args.insert(args.end(), {"--ro-bind", "/dev/null", dest});
                break;
            case MountKind::symlink:
                args.insert(args.end(), {"--symlink", entry.source.string(), dest});
                break;
            case MountKind::proc:
                args.insert(args.end(), {"--proc", dest});
                break;
            // The payload owns bwrap's /dev tmpfs, which has no size: read-only (its device
            // nodes are binds of their own and stay writable; /dev/shm is a tmpfs of its own).
            case MountKind::dev:
                args.insert(args.end(), {"--dev", dest, "--remount-ro", dest});
                break;
            case MountKind::tmpfs:
                args.insert(args.end(), {"--perms", "01777", "--size", std::to_string(entry.size),
                                         "--tmpfs", dest});
                break;
            case MountKind::private_dir:
                args.insert(args.end(), {"--perms", "0700", "--dir", dest});
                break;
            case MountKind::data:
            case MountKind::host_file:
            case MountKind::private_file:
            case MountKind::program: {
                if (entry.fd < 0) break;
                const char* mode = entry.kind == MountKind::private_file ? "0644"
                                   : entry.kind == MountKind::program    ? "0555"
                                                                         : "0444";
                args.insert(args.end(),
                            {"--perms", mode, "--file", std::to_string(entry.fd), dest});
                break;
            }
        }
    }
}

}  // namespace sandbox
