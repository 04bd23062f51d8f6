#include "sandbox/wrap/seccomp_policy.hpp"

#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/base.hpp"

namespace sandbox {
namespace {

constexpr const char* k_denied[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "setns",
    "settimeofday",
    "stime",
    "clock_settime",
    "clock_settime64",
    "clock_adjtime",
    "clock_adjtime64",
    "adjtimex",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "iopl",
    "ioperm",
    "lookup_dcookie",
    "nfsservctl",
    "vhangup",
    "syslog",
};
constexpr unsigned long k_refused_namespaces[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,
                                                  CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
                                                  CLONE_NEWTIME};
constexpr const char* k_enosys[] = {"clone3", "io_uring_setup", "io_uring_enter",
                                    "io_uring_register"};

struct CtxDeleter {
    void operator()(scmp_filter_ctx ctx) const { seccomp_release(ctx); }
};
using Ctx = std::unique_ptr<void, CtxDeleter>;

Expected<void> add_rule(scmp_filter_ctx ctx, std::uint32_t action, const char* name,
                        std::vector<scmp_arg_cmp> args = {}) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return {};  // not a syscall on these architectures
    const int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()),
                                          args.empty() ? nullptr : args.data());
    // -EEXIST/-EACCES: a pseudo-syscall that cannot be filtered on one of the arches.
    if (rc != 0 && rc != -EEXIST && rc != -EACCES && rc != -EOPNOTSUPP)
        return fail(ErrorKind::unavailable,
                    errno_message(std::string("seccomp rule ") + name, -rc));
    return {};
}

}  // namespace

Expected<std::string> compile_seccomp_program() {
    Ctx ctx(seccomp_init(SCMP_ACT_ALLOW));
    if (!ctx) return fail(ErrorKind::unavailable, "seccomp_init failed");
    // Syscalls of an architecture the filter does not know are killed outright.
    seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
        seccomp_arch_add(ctx.get(), SCMP_ARCH_X86);
        seccomp_arch_add(ctx.get(), SCMP_ARCH_X32);
    }
    const auto eperm = SCMP_ACT_ERRNO(EPERM);
    for (const char* name : k_denied) {
        SANDGATE_CHECK(add_rule(ctx.get(), eperm, name));
    }
    for (const char* name : k_enosys) {
        SANDGATE_CHECK(add_rule(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), name));
    }
    // The ioctl request is an unsigned int in the kernel: compare the low 32 bits only.
    for (const unsigned long request :
         {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
        SANDGATE_CHECK(add_rule(ctx.get(), eperm, "ioctl",
                                {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, request)}));
    }
    // Namespaces. A step may make a user namespace with unshare(CLONE_NEWUSER) and nothing
    // else: the sandbox's sudo (gen/sudo.cpp) is root of one such namespace, mapped to the
    // step's own uid, which an unprivileged bwrap could not give it otherwise (it maps one uid
    // only). Every other namespace is refused to every process of the sandbox, root of a nested
    // user namespace included: that root owns no mount, network, pid, ipc, uts, cgroup or time
    // namespace, so its capabilities reach only what the step's uid owns already (no
    // netfilter, no mounts: mount and the new mount API are refused above as well), and setns
    // stays refused. clone() with CLONE_NEWUSER is refused too (unshare is the one way in), and
    // clone3, whose flags a filter cannot read, fails with ENOSYS (callers fall back to clone).
    for (const unsigned long flag : seccomp_refused_namespaces()) {
        scmp_arg_cmp cmp{0, SCMP_CMP_MASKED_EQ, flag, flag};
        SANDGATE_CHECK(add_rule(ctx.get(), eperm, "unshare", {cmp}));
    }
    // clone's low byte is the exit signal: CLONE_NEWTIME (0x80) is not a clone() flag.
    for (const unsigned long flag : seccomp_refused_namespaces()) {
        if (flag == CLONE_NEWTIME) continue;
        scmp_arg_cmp cmp{0, SCMP_CMP_MASKED_EQ, flag, flag};
        SANDGATE_CHECK(add_rule(ctx.get(), eperm, "clone", {cmp}));
    }
    {
        scmp_arg_cmp cmp{0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER};
        SANDGATE_CHECK(add_rule(ctx.get(), eperm, "clone", {cmp}));
    }
    // Export through a memfd: seccomp_export_bpf writes the sock_filter array.
    Fd scratch(::memfd_create("sandgate-seccomp-build", MFD_CLOEXEC));
    if (!scratch) return fail(ErrorKind::unavailable, errno_message("memfd_create"));
    if (const int rc = seccomp_export_bpf(ctx.get(), scratch.get()); rc != 0)
        return fail(ErrorKind::unavailable, errno_message("seccomp_export_bpf", -rc));
    const off_t size = ::lseek(scratch.get(), 0, SEEK_END);
    std::string program(static_cast<std::size_t>(size), '\0');
    if (::pread(scratch.get(), program.data(), program.size(), 0) != size)
        return fail(ErrorKind::unavailable, errno_message("reading the seccomp program"));
    return program;
}

std::span<const char* const> seccomp_eperm_syscalls() {
    return k_denied;
}
std::span<const unsigned long> seccomp_refused_namespaces() {
    return k_refused_namespaces;
}
std::span<const char* const> seccomp_enosys_syscalls() {
    return k_enosys;
}

}  // namespace sandbox
