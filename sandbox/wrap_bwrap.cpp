#include "sandbox/wrap_bwrap.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sandbox/limits.hpp"
#include "sandbox/mounts.hpp"
#include "sandbox/offline.hpp"
#include "sandbox/payload.hpp"
#include "sandbox/probe.hpp"
#include "sandbox/seccomp.hpp"
#include "sandbox/wrap_files.hpp"

namespace sandbox {
namespace {

constexpr int k_seccomp_fd = 3;
constexpr int k_args_fd = 4;
constexpr int k_first_data_fd = 5;

// Removes the per-run scratch root after the run (links are removed, never followed), and
// whatever the limits created.
class BwrapResources : public WrapResources {
public:
    std::optional<std::filesystem::path> owned_scratch;
    std::unique_ptr<LimitResources> limits;
    ~BwrapResources() override {
        limits.reset();  // the cgroups first: their processes are gone with the pid namespace
        if (owned_scratch) remove_tree(*owned_scratch);
    }

private:
    static void remove_tree(const std::filesystem::path& root) {
        std::error_code ec;
        // remove_all never follows links. Every metadata write costs a journal entry, so the
        // chmod pass runs only when the payload left a read-only directory behind.
        if (std::filesystem::remove_all(root, ec) != static_cast<std::uintmax_t>(-1) && !ec) return;
        ec.clear();
        for (auto it = std::filesystem::recursive_directory_iterator(
                 root, std::filesystem::directory_options::skip_permission_denied, ec);
             !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
            if (it->is_directory(ec) && !it->is_symlink(ec))
                ::chmod(it->path().c_str(), 0700);
        }
        std::filesystem::remove_all(root, ec);
    }
};

// Where the run's scratch (HOME, TMPDIR, XDG_*, toolchain homes) lives:
// - kept: `--scratch DIR`, on the host, bound, left in place;
// - host: a per-run temp root on the host, bound and removed afterwards (only with
//   --toolchain-cache, whose seeding copies from the cache on the host side);
// - in_wrap: directories in the wrap's private size-limited /tmp tmpfs, made by bwrap itself:
//   nothing to create on the host, and gone with the mount namespace (no removal pass).
enum class ScratchPlace { kept, host, in_wrap };

struct Scratch {
    std::filesystem::path root;
    ScratchPlace place = ScratchPlace::in_wrap;
};

// Inside the wrap /tmp is private, so the name only has to stay clear of the binds (a --cwd
// there is refused: refuse_private_scratch).
constexpr std::string_view k_in_wrap_scratch = k_private_scratch;

// Policy binds: a host path at another path inside. System directories are never a
// destination (a bind there would replace what the wrap keeps read-only).
Expected<void> add_binds(const std::vector<Bind>& binds, std::vector<MountEntry>& entries) {
    static const char* const k_system[] = {"/usr", "/etc", "/proc", "/dev", "/sys", "/bin",
                                           "/sbin", "/lib", "/lib64", "/tmp"};
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

Expected<Scratch> make_scratch(const Policy& policy) {
    if (policy.scratch) {
        std::error_code ec;
        std::filesystem::create_directories(*policy.scratch, ec);
        auto checked = checked_bind_path(*policy.scratch, "--scratch", MustExist::yes);
        if (!checked) return std::unexpected(checked.error());
        return Scratch{*checked, ScratchPlace::kept};
    }
    if (!policy.toolchain_cache)
        return Scratch{std::filesystem::path(k_in_wrap_scratch), ScratchPlace::in_wrap};
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/sandgate-run-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
        return fail(ErrorKind::unavailable, errno_message("creating the run's scratch in " + pattern));
    auto checked = checked_bind_path(pattern, "scratch", MustExist::yes);
    if (!checked) {
        ::rmdir(pattern.c_str());
        return std::unexpected(checked.error());
    }
    return Scratch{*checked, ScratchPlace::host};
}

// The scratch's directories and offline files as entries the wrap creates in its /tmp tmpfs.
void add_in_wrap_scratch(const ScratchLayout& layout, OfflineEnv offline,
                         const std::optional<std::filesystem::path>& cache,
                         std::vector<MountEntry>& entries) {
    for (const auto* dir : {&layout.root, &layout.home, &layout.tmp})
        entries.push_back({MountKind::private_dir, *dir, {}, {}, 1});
    if (offline == OfflineEnv::off) return;
    for (auto& file : offline_config_files(layout, cache))
        entries.push_back({MountKind::private_file, file.path, {}, std::move(file.content), 1});
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
        auto checked = checked_bind_path(path, "--read-only", MustExist::yes);
        if (!checked) return std::unexpected(checked.error());
        if (auto ok = refuse_host_roots(*checked, "--read-only"); !ok) return ok;
        entries.push_back({MountKind::ro_bind, *checked, *checked, {}, 2});
    }
    for (const auto& path : policy.writable) {
        auto checked = checked_bind_path(path, "--writable", MustExist::yes);
        if (!checked) return std::unexpected(checked.error());
        if (auto ok = refuse_host_roots(*checked, "--writable"); !ok) return ok;
        entries.push_back({MountKind::bind, *checked, *checked, {}, 2});
    }
    if (auto added = add_binds(policy.binds, entries); !added) return added;
    if (policy.toolchain_cache) {
        auto checked = checked_bind_path(*policy.toolchain_cache, "--toolchain-cache", MustExist::yes);
        if (!checked) return std::unexpected(checked.error());
        entries.push_back({MountKind::ro_bind, *checked, *checked, {}, 2});
    }
    // The agent's own files: masked wherever a bind would otherwise show them.
    for (const auto& path : agent_private_paths(entries)) {
        std::error_code ec;
        const auto kind = std::filesystem::is_directory(path, ec) ? MountKind::hide_dir
                                                                  : MountKind::hide_file;
        entries.push_back({kind, path, {}, {}, 1});
    }
    for (const auto& path : policy.hide) {
        auto checked = checked_bind_path(path, "--hide", MustExist::no);
        if (!checked) return std::unexpected(checked.error());
        std::error_code ec;
        if (!std::filesystem::exists(*checked, ec)) continue;  // nothing there to hide
        const auto kind = std::filesystem::is_directory(*checked, ec) ? MountKind::hide_dir
                                                                      : MountKind::hide_file;
        entries.push_back({kind, *checked, {}, {}, 3});
    }
    return {};
}

// Turns the ordered layout into bwrap options; data files become fds 5, 6, ... (memfds
// for generated contents, read-only fds of the files themselves for host files)
Expected<void> mount_options(const std::vector<MountEntry>& entries, std::vector<std::string>& args,
                             std::vector<Fd>& data_fds) {
    for (const auto& entry : entries) {
        const std::string dest = entry.dest.string();
        switch (entry.kind) {
            case MountKind::ro_bind: args.insert(args.end(), {"--ro-bind", entry.source.string(), dest}); break;
            case MountKind::ro_bind_try:
                args.insert(args.end(), {"--ro-bind-try", entry.source.string(), dest});
                break;
            case MountKind::bind: args.insert(args.end(), {"--bind", entry.source.string(), dest}); break;
            case MountKind::hide_dir:
                args.insert(args.end(), {"--perms", "0555", "--tmpfs", dest, "--remount-ro", dest});
                break;
            case MountKind::hide_file: args.insert(args.end(), {"--ro-bind", "/dev/null", dest}); break;
            case MountKind::symlink: args.insert(args.end(), {"--symlink", entry.source.string(), dest}); break;
            case MountKind::proc: args.insert(args.end(), {"--proc", dest}); break;
            case MountKind::dev: args.insert(args.end(), {"--dev", dest}); break;
            case MountKind::tmpfs:
                args.insert(args.end(), {"--perms", "01777", "--size", std::to_string(entry.size),
                                         "--tmpfs", dest});
                break;
            case MountKind::private_dir: args.insert(args.end(), {"--perms", "0700", "--dir", dest}); break;
            case MountKind::host_file: {
                // Gone or swapped since the plan looked: that file is simply not shown.
                auto fd = open_host_file(entry.source, k_max_host_file);
                if (!fd) break;
                const int number = k_first_data_fd + static_cast<int>(data_fds.size());
                data_fds.push_back(std::move(*fd));
                args.insert(args.end(), {"--perms", "0444", "--file", std::to_string(number), dest});
                break;
            }
            case MountKind::data:
            case MountKind::private_file: {
                auto fd = content_fd("sandgate-file", entry.content);
                if (!fd) return std::unexpected(fd.error());
                const int number = k_first_data_fd + static_cast<int>(data_fds.size());
                data_fds.push_back(std::move(*fd));
                const char* mode = entry.kind == MountKind::data ? "0444" : "0644";
                args.insert(args.end(), {"--perms", mode, "--file", std::to_string(number), dest});
                break;
            }
        }
    }
    return {};
}

struct StatusChannel {
    Fd read;
    Fd write;
};

// The pipe for bwrap's --json-status-fd: {"child-pid": N, ...} once the namespaces exist,
// {"exit-code": N} once the payload has exited (a few hundred bytes per run, well within the
// pipe). The payload never holds it: bwrap's pid 1 closes it before starting the payload.
Expected<StatusChannel> status_channel() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return fail(ErrorKind::unavailable, errno_message("pipe2"));
    StatusChannel channel{Fd(fds[0]), Fd(fds[1])};
    // Only our end is non-blocking: bwrap's writes must not fail with EAGAIN.
    if (::fcntl(channel.write.get(), F_SETFL, 0) != 0)
        return fail(ErrorKind::unavailable, errno_message("fcntl(F_SETFL) on the status pipe"));
    return channel;
}

nlohmann::ordered_json describe(const std::filesystem::path& bwrap, const Policy& policy,
                                const Scratch& scratch, bool offline, const LimitPlan& limits) {
    nlohmann::ordered_json doc;
    doc["mode"] = "bwrap";
    doc["bwrap"] = bwrap.string();
    doc["network"] = (policy.network == NetworkMode::host ? "host" : "none");
    doc["uid"] = k_sandbox_uid;
    doc["seccomp"] = true;
    doc["offline"] = offline;
    doc["scratch"] = scratch.root.string();
    doc["scratch_kept"] = scratch.place == ScratchPlace::kept;
    doc["scratch_in"] = scratch.place == ScratchPlace::in_wrap ? "tmpfs" : "host";
    doc["limits"] = limits.describe();
    return doc;
}

}  // namespace

Expected<void> refuse_private_scratch(const std::filesystem::path& path, std::string_view flag) {
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(path, ec).lexically_normal();
    if (ec || !path_within(absolute, std::filesystem::path(k_private_scratch))) return {};
    return fail(ErrorKind::invalid_input,
                std::string(flag) + " " + path.string() + ": lies in the wrap's private scratch " +
                    std::string(k_private_scratch) +
                    ", a tmpfs that exists only inside the sandbox; give a directory of the host "
                    "(the worktree)");
}

namespace {

// What the plan decides before any fd is made: the working directory, the scratch, the
// limits, the mounts in bwrap's order and the payload's environment.
struct BwrapLayout {
    std::filesystem::path cwd;
    Scratch scratch;
    LimitPlan limits;
    bool offline = false;
    std::vector<MountEntry> entries;
    Environment env;
};

// Checks the request's paths and makes the host side of the scratch (a host scratch root is
// handed to `resources`, which removes it after the run).
Expected<BwrapLayout> plan_layout(const RunRequest& request, BwrapResources& resources) {
    const Policy& policy = request.policy;
    std::error_code ec;
    const std::filesystem::path cwd_in = request.cwd.empty() ? std::filesystem::current_path(ec)
                                                             : request.cwd;
    if (auto ok = refuse_private_scratch(cwd_in, "--cwd"); !ok) return std::unexpected(ok.error());
    auto cwd = checked_bind_path(cwd_in, "--cwd", MustExist::yes);
    if (!cwd) return std::unexpected(cwd.error());
    auto limits = plan_limits(policy, request.cgroup);
    if (!limits) return std::unexpected(limits.error());
    auto scratch = make_scratch(policy);
    if (!scratch) return std::unexpected(scratch.error());
    if (scratch->place == ScratchPlace::host) resources.owned_scratch = scratch->root;

    BwrapLayout layout{*cwd, *scratch, std::move(*limits), offline_enabled(policy), {}, {}};
    const ScratchLayout dirs = scratch_layout(scratch->root);
    const OfflineEnv offline = layout.offline ? OfflineEnv::on : OfflineEnv::off;
    if (scratch->place != ScratchPlace::in_wrap) {
        if (auto ok = create_scratch(dirs); !ok) return std::unexpected(ok.error());
        if (auto ok = seed_toolchain_home(dirs, offline, policy.toolchain_cache); !ok)
            return std::unexpected(ok.error());
    }
    auto& entries = layout.entries;
    entries = system_mounts(k_sandbox_uid, k_sandbox_gid, dirs.home,
                            policy.network == NetworkMode::host ? WithResolv::yes : WithResolv::no);
    entries.push_back({MountKind::proc, "/proc", {}, {}, 0});
    entries.push_back({MountKind::dev, "/dev", {}, {}, 0});
    entries.push_back({MountKind::tmpfs, "/tmp", {}, {}, 0, layout.limits.tmp_size});
    if (scratch->place == ScratchPlace::in_wrap)
        add_in_wrap_scratch(dirs, offline, policy.toolchain_cache, entries);
    if (auto ok = add_policy_mounts(request, *cwd, *scratch, entries); !ok)
        return std::unexpected(ok.error());
    order_mounts(entries);
    layout.env = wrapped_environment(request.env, dirs, offline, policy.toolchain_cache);
    return layout;
}

// bwrap's options after the mounts: namespaces, identity, privileges, the environment.
void add_process_options(const Policy& policy, const BwrapLayout& layout,
                         std::vector<std::string>& args) {
    args.insert(args.end(), {"--remount-ro", "/", "--unshare-all"});
    if (policy.network == NetworkMode::host) args.push_back("--share-net");
    args.insert(args.end(), {"--unshare-user", "--uid", std::to_string(k_sandbox_uid), "--gid",
                             std::to_string(k_sandbox_gid), "--disable-userns", "--hostname",
                             "sandgate", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                             "--seccomp", std::to_string(k_seccomp_fd), "--chdir",
                             layout.cwd.string(), "--clearenv"});
    for (const auto& [name, value] : layout.env) args.insert(args.end(), {"--setenv", name, value});
}

// The fds bwrap inherits, in order: the seccomp program (3), the packed options (4), the data
// files (5, ...), the status pipe's write end (last); and the status pipe's read end for us.
struct BwrapFds {
    std::vector<Fd> inherited;
    Fd status;
};

Expected<BwrapFds> bwrap_fds(const Policy& policy, const BwrapLayout& layout) {
    auto filter = seccomp_filter_fd();
    if (!filter) return std::unexpected(filter.error());
    std::vector<std::string> args;
    std::vector<Fd> data_fds;
    if (auto ok = mount_options(layout.entries, args, data_fds); !ok) return std::unexpected(ok.error());
    add_process_options(policy, layout, args);
    auto status = status_channel();
    if (!status) return std::unexpected(status.error());
    args.insert(args.end(), {"--json-status-fd",
                             std::to_string(k_first_data_fd + static_cast<int>(data_fds.size()))});
    std::string packed;
    for (const auto& arg : args) {
        packed += arg;
        packed.push_back('\0');
    }
    auto args_fd = content_memfd("sandgate-bwrap-args", packed);
    if (!args_fd) return std::unexpected(args_fd.error());
    BwrapFds fds;
    fds.inherited.push_back(std::move(*filter));
    fds.inherited.push_back(std::move(*args_fd));
    for (auto& fd : data_fds) fds.inherited.push_back(std::move(fd));
    fds.inherited.push_back(std::move(status->write));
    fds.status = std::move(status->read);
    return fds;
}

// Creates what the limits need on the host (v1 cgroups) and records the rest for the spawn.
Expected<void> attach_limits(const LimitPlan& limits, WrapPlan& plan, BwrapResources& resources) {
    auto limit_resources = apply_limits(limits);
    if (!limit_resources) return std::unexpected(limit_resources.error());
    plan.join_cgroups = (*limit_resources)->take_procs();
    plan.rlimits = rlimits_of(limits);
    plan.cgroup2_limits = limits.cgroup2_files;
    resources.limits = std::move(*limit_resources);
    return {};
}

}  // namespace

Expected<WrapPlan> plan_bwrap(const RunRequest& request) {
    if (request.argv.empty()) return fail(ErrorKind::invalid_input, "empty command");
    auto bwrap = find_bwrap();
    if (!bwrap) return std::unexpected(bwrap.error());
    // No probe of user namespaces or seccomp here: bwrap refuses to start without them, and
    // run() asks the probes why only then (diagnose_wrap_failure), sparing every run a
    // throwaway namespace.
    auto resources = std::make_unique<BwrapResources>();
    auto layout = plan_layout(request, *resources);
    if (!layout) return std::unexpected(layout.error());
    auto fds = bwrap_fds(request.policy, *layout);
    if (!fds) return std::unexpected(fds.error());

    WrapPlan plan;
    plan.argv = {bwrap->string(), "--args", std::to_string(k_args_fd), "--"};
    const int verdict = resolve_payload(request.argv[0], layout->env, layout->cwd, layout->entries);
    const auto payload = verdict == 0 ? request.argv : failing_payload(verdict, request.argv[0]);
    plan.argv.insert(plan.argv.end(), payload.begin(), payload.end());
    plan.inherited_fds = std::move(fds->inherited);
    plan.status = std::move(fds->status);
    if (auto ok = attach_limits(layout->limits, plan, *resources); !ok)
        return std::unexpected(ok.error());
    plan.tree_kill = TreeKill::pidns;
    plan.description = describe(*bwrap, request.policy, layout->scratch, layout->offline, layout->limits);
    plan.resources = std::move(resources);
    return plan;
}

Expected<std::vector<std::string>> read_bwrap_options(const WrapPlan& plan) {
    if (plan.inherited_fds.size() <= static_cast<std::size_t>(k_args_fd - 3))
        return fail(ErrorKind::invalid_input, "the plan carries no bwrap options");
    const int fd = plan.inherited_fds[k_args_fd - 3].get();
    std::string packed;
    char buffer[4096];
    for (off_t offset = 0;;) {
        const ssize_t n = ::pread(fd, buffer, sizeof buffer, offset);
        if (n < 0) return fail(ErrorKind::permanent, errno_message("reading the bwrap options"));
        if (n == 0) break;
        packed.append(buffer, static_cast<std::size_t>(n));
        offset += n;
    }
    std::vector<std::string> options;
    std::size_t start = 0;
    while (start < packed.size()) {
        const std::size_t end = packed.find('\0', start);
        options.push_back(packed.substr(start, end - start));
        start = end + 1;
    }
    return options;
}

}  // namespace sandbox
