#include "sandbox/wrap/wrap_bwrap.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "sandbox/egress/egress_wrap.hpp"
#include "sandbox/process/limits.hpp"
#include "sandbox/wrap/bwrap_layout.hpp"
#include "sandbox/wrap/identity.hpp"
#include "sandbox/wrap/mounts.hpp"
#include "sandbox/wrap/netns.hpp"
#include "sandbox/wrap/offline.hpp"
#include "sandbox/wrap/payload.hpp"
#include "sandbox/wrap/payload_status.hpp"
#include "sandbox/wrap/probe.hpp"
#include "sandbox/wrap/seccomp.hpp"
#include "sandbox/wrap/shims.hpp"
#include "sandbox/wrap/tool_cache.hpp"
#include "sandbox/wrap/wrap_files.hpp"

namespace sandbox {
namespace {

constexpr int k_options_fd = 3;
constexpr int k_seccomp_fd = 4;
constexpr int k_first_file_fd = 5;

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

// Where bwrap reads its options (--args): a socket for a pending plan, which bwrap blocks on
// until our end is closed (a socket rather than a pipe: send() can refuse SIGPIPE when bwrap is
// gone); a memfd for a complete one, which can be read again by every start of the plan.
struct OptionsChannel {
    Fd bwrap_end;  // inherited as k_options_fd
    Fd our_end;    // the socket's other end, or a second fd of the memfd
};

Expected<OptionsChannel> options_channel(PlanTiming timing) {
    if (timing == PlanTiming::pending) {
        int fds[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
            return fail(ErrorKind::unavailable, errno_message("socketpair for the bwrap options"));
        return OptionsChannel{Fd(fds[0]), Fd(fds[1])};
    }
    auto memfd = SANDGATE_TRY(content_memfd("sandgate-bwrap-args", {}));
    Fd ours(::fcntl(memfd.get(), F_DUPFD_CLOEXEC, 0));
    if (!ours) return fail(ErrorKind::unavailable, errno_message("dup of the bwrap options memfd"));
    return OptionsChannel{std::move(memfd), std::move(ours)};
}

Expected<void> send_all(const Fd& socket, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::send(socket.get(), text.data(), text.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail(ErrorKind::unavailable, errno_message("handing bwrap its options"));
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return {};
}

nlohmann::ordered_json describe(const std::filesystem::path& bwrap, const Policy& policy,
                                const Scratch& scratch, OfflineEnv offline, const LimitPlan& limits,
                                const std::optional<Owner>& identity) {
    nlohmann::ordered_json doc;
    doc["mode"] = "bwrap";
    doc["bwrap"] = bwrap.string();
    doc["network"] = policy.network == NetworkMode::host ? "host"
                     : policy.egress.empty()             ? "none"
                                                         : "allowlist";
    if (!policy.egress.empty()) doc["egress"] = describe_egress(policy);
    doc["uid"] = k_sandbox_uid;
    if (identity) doc["host_uid"] = to_string(*identity);
    doc["seccomp"] = true;
    doc["offline"] = offline == OfflineEnv::on;
    doc["scratch"] = scratch.root.string();
    doc["scratch_kept"] = scratch.place == ScratchPlace::kept;
    doc["scratch_in"] = scratch.place == ScratchPlace::in_wrap ? "tmpfs" : "host";
    doc["limits"] = limits.describe();
    return doc;
}

// What bwrap must hold when it starts, decided before the rest of the plan: bwrap itself, the
// limits (applied between fork and exec), the scratch (the generated passwd names its home)
// and the files bwrap copies in, each with its fd number.
struct BwrapStart {
    std::filesystem::path bwrap;
    LimitPlan limits;
    Scratch scratch;
    OfflineEnv offline = OfflineEnv::off;
    std::vector<MountEntry> files;
    int status_fd = -1;                           // the number of bwrap's status pipe
    std::filesystem::path cwd;                    // checked
    std::vector<MountEntry> policy_mounts;        // add_policy_mounts, sources through the portal
    std::optional<Owner> identity;                // the sandbox's host identity when not ours
    std::vector<std::filesystem::path> writable;  // the trees `identity` is given before the run
    int payload_status_fd = -1;  // the number of the payload reporter's pipe (payload_status.hpp)
    int egress_fd = -1;          // --network allowlist: the forwarder's end of the proxy's pair
};

// The files bwrap copies into the sandbox: the /etc it shows, and an in-wrap scratch's offline
// configuration (a host scratch gets it written on the host instead).
std::vector<MountEntry> wrap_files(const Policy& policy, const Scratch& scratch,
                                   OfflineEnv offline) {
    const ScratchLayout dirs = scratch_layout(scratch.root);
    auto files = system_files(k_sandbox_uid, k_sandbox_gid, dirs.home);
    files.push_back({MountKind::program,
                     std::string(k_status_init_path),
                     {},
                     std::string(status_init_program()),
                     1});
    for (auto& shim : shim_programs()) files.push_back(std::move(shim));
    if (!policy.egress.empty())
        files.push_back({MountKind::program,
                         std::string(k_egress_forwarder_path),
                         {},
                         std::string(egress_forwarder_program()),
                         1});
    if (scratch.place != ScratchPlace::in_wrap || offline == OfflineEnv::off) return files;
    for (auto& file : offline_config_files(dirs, policy.toolchain_cache))
        files.push_back({MountKind::private_file, file.path, {}, std::move(file.content), 1});
    return files;
}

// Opens the files' fds, numbered from k_first_file_fd: a read-only fd of a host file itself, a
// memfd for generated contents. A host file that is missing, odd or too large is left out
// (not shown inside).
Expected<std::vector<Fd>> open_wrap_files(std::vector<MountEntry>& files) {
    std::vector<Fd> fds;
    std::vector<MountEntry> opened;
    for (auto& entry : files) {
        auto fd = entry.kind == MountKind::host_file ? open_host_file(entry.source, k_max_host_file)
                                                     : content_fd("sandgate-file", entry.content);
        if (!fd && entry.kind == MountKind::host_file) continue;
        if (!fd) return std::unexpected(fd.error());
        entry.fd = k_first_file_fd + static_cast<int>(fds.size());
        fds.push_back(std::move(*fd));
        opened.push_back(std::move(entry));
    }
    files = std::move(opened);
    return fds;
}

// The working directory the payload starts in, checked (it is bound at its own path).
Expected<std::filesystem::path> checked_cwd(const RunRequest& request) {
    std::error_code ec;
    const std::filesystem::path cwd_in =
        request.cwd.empty() ? std::filesystem::current_path(ec) : request.cwd;
    SANDGATE_CHECK(refuse_private_scratch(cwd_in, "--cwd"));
    return checked_bind_path(cwd_in, "--cwd", MustExist::yes);
}

Expected<BwrapStart> plan_start(const RunRequest& request, BwrapResources& resources) {
    auto bwrap = find_bwrap();
    if (!bwrap) return std::unexpected(bwrap.error());
    auto limits = plan_limits(request.policy, request.cgroup);
    if (!limits) return std::unexpected(limits.error());
    auto cwd = checked_cwd(request);
    if (!cwd) return std::unexpected(cwd.error());
    auto scratch = make_scratch(request.policy);
    if (!scratch) return std::unexpected(scratch.error());
    if (scratch->place == ScratchPlace::host) resources.owned_scratch = scratch->root;
    BwrapStart start;
    start.bwrap = *bwrap;
    start.limits = std::move(*limits);
    start.scratch = *scratch;
    start.offline = offline_enabled(request.policy) ? OfflineEnv::on : OfflineEnv::off;
    start.cwd = std::move(*cwd);
    start.identity = sandbox_owner(request.policy);
    start.files = wrap_files(request.policy, start.scratch, start.offline);
    // The policy's binds are known before bwrap starts: under a host identity of its own,
    // bwrap gets them through the portal (SpawnSpec::portal), made between fork and exec.
    SANDGATE_CHECK(add_policy_mounts(request, start.cwd, start.scratch, start.policy_mounts));
    // The scratch is made for the identity already (create_scratch, its seeding, its payload).
    for (const auto& entry : start.policy_mounts)
        if (entry.kind == MountKind::bind && entry.source != start.scratch.root)
            start.writable.push_back(entry.source);
    return start;
}

// Whether `owner` may search every directory above `path` (mode bits: an ACL that denies
// makes bwrap fail closed, one that allows only costs a portal that was not needed).
bool reachable_by(const std::filesystem::path& path, const Owner& owner) {
    std::filesystem::path prefix = "/";
    for (auto it = path.begin(); it != path.end(); ++it) {
        if (std::next(it) == path.end()) break;
        if (*it != "/") prefix /= *it;
        struct stat st {};
        if (::stat(prefix.c_str(), &st) != 0) return false;
        const bool search = st.st_uid == owner.uid   ? (st.st_mode & S_IXUSR) != 0
                            : st.st_gid == owner.gid ? (st.st_mode & S_IXGRP) != 0
                                                     : (st.st_mode & S_IXOTH) != 0;
        if (!search) return false;
    }
    return true;
}

// Under a host identity of its own, bwrap resolves its bind sources as that identity. When it
// cannot reach one of them (a worktree under root's 0700 home), every source is opened here
// instead and bound into the portal, and bwrap is given the portal's paths.
Expected<void> plan_portal(BwrapStart& start, WrapPlan& plan) {
    if (!start.identity) return {};
    plan.identity = start.identity;
    const auto bound = [](const MountEntry& entry) {
        return entry.kind == MountKind::bind || entry.kind == MountKind::ro_bind ||
               entry.kind == MountKind::ro_bind_try;
    };
    const bool all_reachable = std::all_of(
        start.policy_mounts.begin(), start.policy_mounts.end(), [&](const MountEntry& entry) {
            return !bound(entry) || reachable_by(entry.source, *start.identity);
        });
    if (all_reachable) return {};
    auto dir = SANDGATE_TRY(portal_directory());
    plan.portal_dir = dir;
    for (auto& entry : start.policy_mounts) {
        if (!bound(entry)) continue;
        // A bind source checked_bind_path resolved (no link in it): the portal binds this very
        // inode, so nothing can be swapped in between.
        // trusted path: see above
        Fd fd(::open(entry.source.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
        if (!fd) {
            if (entry.kind == MountKind::ro_bind_try && errno == ENOENT) continue;
            return fail(ErrorKind::invalid_input,
                        errno_message("bind source " + entry.source.string()));
        }
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0)
            return fail(ErrorKind::unavailable,
                        errno_message("bind source " + entry.source.string()));
        entry.host_source = entry.source;
        entry.source = plan.portal_dir + "/" + std::to_string(plan.portal_fds.size());
        plan.portal_fds.push_back(std::move(fd));
        plan.portal_directories.push_back(S_ISDIR(st.st_mode));
    }
    return {};
}

// Creates what the limits need on the host (v1 cgroups) and records the rest for the spawn.
Expected<void> attach_limits(const LimitPlan& limits, WrapPlan& plan, BwrapResources& resources) {
    auto limit_resources = SANDGATE_TRY(apply_limits(limits));
    plan.join_cgroups = (limit_resources)->take_procs();
    plan.rlimits = rlimits_of(limits);
    plan.cgroup2_limits = limits.cgroup2_files;
    resources.limits = std::move(limit_resources);
    return {};
}

// `bwrap --hostname sandgate --args 3 -- /.sandgate-status-init FD PAYLOAD...`: the payload
// runs under its reporter (payload_status.hpp). The one option outside the stream is the one
// that makes a stream cut short fail (see plan_bwrap in the header). Under --network allowlist
// the egress forwarder comes first (egress_wrap.hpp) and execs the reporter.
std::vector<std::string> bwrap_argv(const std::filesystem::path& bwrap,
                                    const std::vector<std::string>& payload, int payload_status_fd,
                                    int egress_fd) {
    std::vector<std::string> argv = {
        bwrap.string(), "--hostname", "sandgate", "--args", std::to_string(k_options_fd), "--"};
    if (egress_fd >= 0)
        argv.insert(argv.end(), {std::string(k_egress_forwarder_path), std::to_string(egress_fd)});
    argv.insert(argv.end(), {std::string(k_status_init_path), std::to_string(payload_status_fd)});
    argv.insert(argv.end(), payload.begin(), payload.end());
    return argv;
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

// What the rest of the plan decides: the working directory, the mounts in bwrap's order and the
// payload's environment.
struct BwrapLayout {
    std::filesystem::path cwd;
    std::vector<MountEntry> entries;
    Environment env;
};

// Makes the host side of a host or kept scratch (seeded when it is new), gives the writable
// trees to the sandbox's host identity, and lays out the mounts around `files` (moved in).
Expected<BwrapLayout> plan_layout(const RunRequest& request, BwrapStart& start,
                                  std::vector<MountEntry> files) {
    const Policy& policy = request.policy;
    BwrapLayout layout{start.cwd, {}, {}};
    const ScratchLayout dirs = scratch_layout(start.scratch.root);
    const OfflineEnv offline = start.offline;
    const bool in_wrap = start.scratch.place == ScratchPlace::in_wrap;
    if (!in_wrap) {
        // Seeded once, when its home is made: never again through paths a step could replace.
        auto fresh = SANDGATE_TRY(create_scratch(dirs, start.identity));
        if (fresh) {
            SANDGATE_CHECK(
                seed_toolchain_home(*fresh, dirs, offline, policy.toolchain_cache, start.identity));
        }
    }
    if (start.identity) {
        SANDGATE_CHECK(give_trees({start.writable, start.policy_mounts, *start.identity}));
    }
    auto& entries = layout.entries;
    entries = system_mounts(policy.network == NetworkMode::host ? WithResolv::yes : WithResolv::no);
    entries.push_back({MountKind::proc, "/proc", {}, {}, 0});
    entries.push_back({MountKind::dev, "/dev", {}, {}, 0});
    entries.push_back({MountKind::tmpfs, "/tmp", {}, {}, 0, start.limits.tmp_size});
    // bwrap's /dev is an unbounded tmpfs the payload owns: dev() remounts it read-only, and
    // /dev/shm gets a tmpfs of its own, bounded like /tmp.
    entries.push_back({MountKind::tmpfs, "/dev/shm", {}, {}, 0, start.limits.tmp_size});
    if (in_wrap) {
        for (const auto* dir : {&dirs.root, &dirs.home, &dirs.tmp})
            entries.push_back({MountKind::private_dir, *dir, {}, {}, 1});
    }
    for (auto& file : files) entries.push_back(std::move(file));
    for (auto& shim : shim_mounts()) entries.push_back(std::move(shim));
    for (auto& entry : start.policy_mounts) entries.push_back(std::move(entry));
    order_mounts(entries);
    layout.env = wrapped_environment(request.env, dirs, offline, policy.toolchain_cache);
    prepend_shim_path(layout.env);
    if (policy.tool_cache) point_at_tool_cache(layout.env);
    if (!policy.egress.empty()) {
        for (auto& [name, value] : egress_proxy_environment()) {
            std::erase_if(layout.env, [&](const auto& entry) { return entry.first == name; });
            layout.env.emplace_back(name, value);
        }
    }
    // Under a host identity of its own, what the trusted side made (the mirror a worktree's
    // .git names, read-only) shows as another user's: git would call it dubious ownership.
    if (start.identity) trust_git_directories(layout.env);
    return layout;
}

// bwrap's options, NUL-separated: the mounts; namespaces, identity, privileges, the
// environment; and last --unshare-uts, the completion mark (see plan_bwrap). The namespaces
// are named one by one rather than with --unshare-all, which would unshare the UTS namespace
// early in the stream. With a network namespace of sandgate's own (WrapPlan::netns), or the
// host's network, bwrap keeps the one it starts in rather than making one.
//
// No --disable-userns: it would leave the payload in a user namespace that can make no other
// (bwrap sets max_user_namespaces to 1 and uses it up), and the sandbox's sudo (shims.hpp)
// needs exactly one more. The seccomp filter (seccomp_policy.cpp) lets a step make a user
// namespace by unshare(CLONE_NEWUSER) alone and no other namespace at all, so root of such a
// namespace owns nothing but itself.
std::string options_text(const Policy& policy, const BwrapLayout& layout, int status_fd,
                         const Fd& netns) {
    std::vector<std::string> args;
    mount_options(layout.entries, args);
    args.insert(args.end(), {"--remount-ro", "/", "--unshare-user", "--unshare-ipc",
                             "--unshare-pid", "--unshare-cgroup-try"});
    if (policy.network != NetworkMode::host && !netns) args.push_back("--unshare-net");
    args.insert(args.end(),
                {"--uid", std::to_string(k_sandbox_uid), "--gid", std::to_string(k_sandbox_gid),
                 "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--seccomp",
                 std::to_string(k_seccomp_fd), "--chdir", layout.cwd.string(), "--clearenv"});
    for (const auto& [name, value] : layout.env) args.insert(args.end(), {"--setenv", name, value});
    args.insert(args.end(), {"--json-status-fd", std::to_string(status_fd), "--unshare-uts"});
    std::string packed;
    for (const auto& arg : args) {
        packed += arg;
        packed.push_back('\0');
    }
    return packed;
}

class BwrapCompletion final : public PendingWrap {
public:
    BwrapCompletion(BwrapStart start, Fd options, PlanTiming timing)
        : m_start(std::move(start)), m_options(std::move(options)), m_timing(timing) {}

    Expected<void> complete(const RunRequest& request, WrapPlan& plan) override {
        auto layout = SANDGATE_TRY(plan_layout(request, m_start, std::move(m_start.files)));
        m_text = options_text(request.policy, layout, m_start.status_fd, plan.netns);
        const int verdict =
            resolve_payload(request.argv[0], layout.env, layout.cwd, layout.entries);
        if (verdict != 0)
            plan.argv = bwrap_argv(m_start.bwrap, failing_payload(verdict, request.argv[0]),
                                   m_start.payload_status_fd, m_start.egress_fd);
        plan.description = describe(m_start.bwrap, request.policy, m_start.scratch, m_start.offline,
                                    m_start.limits, m_start.identity);
        return {};
    }

    // The socket is closed after the write: EOF is what bwrap waits for.
    Expected<void> release() override {
        if (m_timing == PlanTiming::complete) return write_contents(m_options, m_text);
        auto sent = send_all(m_options, m_text);
        m_options.reset();
        return sent;
    }

private:
    BwrapStart m_start;
    Fd m_options;  // our end of the options channel
    PlanTiming m_timing;
    std::string m_text;
};

}  // namespace

Expected<WrapPlan> plan_bwrap(const RunRequest& request, PlanTiming timing) {
    if (request.argv.empty()) return fail(ErrorKind::invalid_input, "empty command");
    // No probe of user namespaces or seccomp here: bwrap refuses to start without them, and
    // run() asks the probes why only then (diagnose_wrap_failure), sparing every run a
    // throwaway namespace.
    // A pending plan's run starts bwrap in a network namespace of its own making, made while
    // the rest is planned (or earlier, by the caller: RunRequest::early_netns).
    std::optional<LoopbackNetns> made_here;
    LoopbackNetns* netns = nullptr;
    if (timing == PlanTiming::pending && request.policy.network == NetworkMode::none)
        netns = request.early_netns != nullptr ? request.early_netns : &made_here.emplace();
    auto resources = std::make_unique<BwrapResources>();
    auto start = SANDGATE_TRY(plan_start(request, *resources));
    auto channel = SANDGATE_TRY(options_channel(timing));
    auto filter = SANDGATE_TRY(seccomp_filter_fd());
    auto files = open_wrap_files(start.files);
    if (!files) return std::unexpected(files.error());
    WrapPlan plan;
    SANDGATE_CHECK(plan_portal(start, plan));
    plan.fresh_session_keyring = true;
    auto status = status_channel();
    if (!status) return std::unexpected(status.error());
    auto payload_status = status_channel();
    if (!payload_status) return std::unexpected(payload_status.error());

    plan.inherited_fds.push_back(std::move(channel.bwrap_end));
    plan.inherited_fds.push_back(std::move(filter));
    for (auto& fd : *files) plan.inherited_fds.push_back(std::move(fd));
    start.status_fd = 3 + static_cast<int>(plan.inherited_fds.size());
    plan.inherited_fds.push_back(std::move(status->write));
    plan.status = std::move(status->read);
    start.payload_status_fd = 3 + static_cast<int>(plan.inherited_fds.size());
    plan.inherited_fds.push_back(std::move(payload_status->write));
    plan.payload_status = std::move(payload_status->read);
    if (!request.policy.egress.empty()) {
        auto egress = start_egress(request.policy);
        if (!egress) return std::unexpected(egress.error());
        start.egress_fd = 3 + static_cast<int>(plan.inherited_fds.size());
        plan.inherited_fds.push_back(std::move(egress->wrap_end));
        plan.egress = std::move(egress->proxy);
    }
    plan.argv = bwrap_argv(start.bwrap, request.argv, start.payload_status_fd, start.egress_fd);
    SANDGATE_CHECK(attach_limits(start.limits, plan, *resources));
    plan.tree_kill = TreeKill::pidns;
    plan.resources = std::move(resources);
    if (netns != nullptr) plan.netns = netns->take();
    auto completion =
        std::make_unique<BwrapCompletion>(std::move(start), std::move(channel.our_end), timing);
    if (timing == PlanTiming::pending) {
        plan.pending = std::move(completion);
        return plan;
    }
    SANDGATE_CHECK(completion->complete(request, plan));
    SANDGATE_CHECK(completion->release());
    return plan;
}

Expected<std::vector<std::string>> read_bwrap_options(const WrapPlan& plan) {
    if (plan.inherited_fds.size() <= static_cast<std::size_t>(k_options_fd - 3))
        return fail(ErrorKind::invalid_input, "the plan carries no bwrap options");
    const int fd = plan.inherited_fds[k_options_fd - 3].get();
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
