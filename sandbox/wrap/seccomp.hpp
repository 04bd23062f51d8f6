#pragma once
// The syscall filter every wrapped command runs under, built with libseccomp and handed to
// bwrap as BPF through an fd (`--seccomp FD`). bwrap loads it just before exec, after its own
// setup, so the filter constrains the payload and everything it starts.
//
// Denied with EPERM: ptrace, process_vm_readv/writev, keyctl, add_key, request_key, bpf,
// perf_event_open, userfaultfd, the mount family (mount, umount2, pivot_root, move_mount,
// open_tree, fsopen, fsconfig, fsmount, fspick, mount_setattr), setns, unshare with any
// namespace flag but CLONE_NEWUSER (a user namespace alone is the sandbox's sudo:
// seccomp_policy.cpp), clone with any namespace flag, CLONE_NEWUSER included, clock setting
// (settimeofday, clock_settime, clock_adjtime, adjtimex), module loading, kexec, reboot,
// swapon/off, acct, quotactl, open_by_handle_at, iopl/ioperm, lookup_dcookie, ioctl
// TIOCSTI/TIOCLINUX (compared on the low 32 bits, so high bits set by the caller do not slip
// through). clone3 gets ENOSYS (its flags live in memory a filter cannot read; libcs fall back to
// clone, whose flags are checked). io_uring gets ENOSYS (callers fall back to ordinary syscalls).
// Foreign architectures (x86 and x32 on x86_64) carry the same rules.

#include "sandbox/base.hpp"

namespace sandbox {

// A memfd holding the filter's BPF program, positioned at offset 0 (wrap_files' content_fd:
// sealed once a process uses it a second time).
Expected<Fd> seccomp_filter_fd();

}  // namespace sandbox
