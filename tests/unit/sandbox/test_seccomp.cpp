// The wrap's syscall filter (sandbox/wrap/seccomp_policy.cpp, compiled to BPF at build time by
// sandbox/gen/seccomp_gen.cpp): the program linked into sandgate is byte for byte what
// libseccomp compiles from the rules now, every listed syscall and ioctl is denied on every
// filtered architecture (checked by running the BPF program on seccomp_data records), and the
// kernel enforces the linked program.
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "sandbox/wrap/seccomp.hpp"
#include "sandbox/wrap/seccomp_policy.hpp"

namespace {

std::vector<sock_filter> instructions(std::string_view program) {
    REQUIRE(program.size() % sizeof(sock_filter) == 0);
    std::vector<sock_filter> out(program.size() / sizeof(sock_filter));
    std::memcpy(out.data(), program.data(), program.size());
    return out;
}

// A classic-BPF interpreter for what a seccomp filter may contain (the kernel's checker
// allows loads from seccomp_data, the scratch memory, ALU, jumps and returns).
std::uint32_t run_filter(const std::vector<sock_filter>& program, const seccomp_data& data) {
    std::uint32_t a = 0, x = 0, memory[BPF_MEMWORDS] = {};
    unsigned char bytes[sizeof data];
    std::memcpy(bytes, &data, sizeof data);
    for (std::size_t pc = 0; pc < program.size(); ++pc) {
        const sock_filter& op = program[pc];
        const std::uint32_t operand = BPF_SRC(op.code) == BPF_X ? x : op.k;
        switch (BPF_CLASS(op.code)) {
            case BPF_LD:
                if (BPF_MODE(op.code) == BPF_ABS) {
                    REQUIRE(op.k + 4 <= sizeof data);
                    std::memcpy(&a, bytes + op.k, 4);
                } else if (BPF_MODE(op.code) == BPF_MEM) {
                    a = memory[op.k];
                } else if (BPF_MODE(op.code) == BPF_IMM) {
                    a = op.k;
                } else {
                    FAIL("unexpected load mode " << op.code);
                }
                break;
            case BPF_LDX:
                x = BPF_MODE(op.code) == BPF_MEM ? memory[op.k] : op.k;
                break;
            case BPF_ST:
                memory[op.k] = a;
                break;
            case BPF_STX:
                memory[op.k] = x;
                break;
            case BPF_ALU:
                switch (BPF_OP(op.code)) {
                    case BPF_ADD:
                        a += operand;
                        break;
                    case BPF_SUB:
                        a -= operand;
                        break;
                    case BPF_AND:
                        a &= operand;
                        break;
                    case BPF_OR:
                        a |= operand;
                        break;
                    case BPF_LSH:
                        a <<= operand;
                        break;
                    case BPF_RSH:
                        a >>= operand;
                        break;
                    case BPF_NEG:
                        a = -a;
                        break;
                    default:
                        FAIL("unexpected ALU op " << op.code);
                }
                break;
            case BPF_JMP: {
                if (BPF_OP(op.code) == BPF_JA) {
                    pc += op.k;
                    break;
                }
                bool taken = false;
                switch (BPF_OP(op.code)) {
                    case BPF_JEQ:
                        taken = a == operand;
                        break;
                    case BPF_JGT:
                        taken = a > operand;
                        break;
                    case BPF_JGE:
                        taken = a >= operand;
                        break;
                    case BPF_JSET:
                        taken = (a & operand) != 0;
                        break;
                    default:
                        FAIL("unexpected jump " << op.code);
                }
                pc += taken ? op.jt : op.jf;
                break;
            }
            case BPF_RET:
                return BPF_RVAL(op.code) == BPF_A ? a : op.k;
            case BPF_MISC:
                (BPF_MISCOP(op.code) == BPF_TAX ? x : a) = (BPF_MISCOP(op.code) == BPF_TAX ? a : x);
                break;
            default:
                FAIL("unexpected instruction class " << op.code);
        }
    }
    FAIL("the program fell off its end");
    return 0;
}

seccomp_data call(std::uint32_t arch, int nr, std::vector<std::uint64_t> args = {}) {
    seccomp_data data{};
    data.nr = nr;
    data.arch = arch;
    for (std::size_t i = 0; i < args.size() && i < 6; ++i) data.args[i] = args[i];
    return data;
}

struct Arch {
    std::uint32_t token;  // libseccomp's
    std::uint32_t audit;  // what the kernel puts in seccomp_data.arch
    const char* name;
};

std::vector<Arch> filtered_arches() {
    if (seccomp_arch_native() != SCMP_ARCH_X86_64)
        return {{seccomp_arch_native(), seccomp_arch_native(), "native"}};
    // x32 syscalls arrive as AUDIT_ARCH_X86_64 with __X32_SYSCALL_BIT in the number.
    return {{SCMP_ARCH_X86_64, AUDIT_ARCH_X86_64, "x86_64"},
            {SCMP_ARCH_X86, AUDIT_ARCH_I386, "x86"},
            {SCMP_ARCH_X32, AUDIT_ARCH_X86_64, "x32"}};
}

constexpr std::uint32_t k_eperm = SECCOMP_RET_ERRNO | EPERM;
constexpr std::uint32_t k_enosys = SECCOMP_RET_ERRNO | ENOSYS;

}  // namespace

TEST_CASE("the program linked at build time is what libseccomp compiles from the rules now") {
    const auto generated = sandbox::generated_seccomp_program();
    const auto compiled = sandbox::compile_seccomp_program();
    REQUIRE(compiled);
    CHECK(generated.size() > 8 * sizeof(sock_filter));
    CHECK(std::string(generated) == *compiled);
    // And it is what the wrap hands to bwrap.
    auto fd = sandbox::seccomp_filter_fd();
    REQUIRE(fd);
    std::string read_back(generated.size() + 1, '\0');
    CHECK(::pread(fd->get(), read_back.data(), read_back.size(), 0) ==
          static_cast<ssize_t>(generated.size()));
    read_back.resize(generated.size());
    CHECK(read_back == std::string(generated));
}

TEST_CASE("every listed syscall is denied on every filtered architecture; the rest is allowed") {
    const auto program = instructions(sandbox::generated_seccomp_program());
    for (const auto& arch : filtered_arches()) {
        INFO("arch " << arch.name);
        int checked = 0;
        for (const char* name : sandbox::seccomp_eperm_syscalls()) {
            const int nr = seccomp_syscall_resolve_name_arch(arch.token, name);
            if (nr < 0) continue;  // not a syscall there (or a multiplexed pseudo-syscall)
            INFO("syscall " << name << " = " << nr);
            CHECK(run_filter(program, call(arch.audit, nr)) == k_eperm);
            ++checked;
        }
        CHECK(checked >= 35);
        for (const char* name : sandbox::seccomp_enosys_syscalls()) {
            const int nr = seccomp_syscall_resolve_name_arch(arch.token, name);
            if (nr < 0) continue;
            INFO("syscall " << name);
            CHECK(run_filter(program, call(arch.audit, nr)) == k_enosys);
        }
        for (const char* name : {"read", "write", "execve", "getpid", "wait4", "socket"}) {
            const int nr = seccomp_syscall_resolve_name_arch(arch.token, name);
            if (nr < 0) continue;
            INFO("syscall " << name);
            CHECK(run_filter(program, call(arch.audit, nr, {3, 0, 0})) == SECCOMP_RET_ALLOW);
        }
    }
    for (const char* name : {"ptrace", "keyctl", "bpf", "perf_event_open", "userfaultfd", "mount",
                             "process_vm_readv", "process_vm_writev", "add_key", "request_key",
                             "umount2", "pivot_root", "clock_settime", "settimeofday", "adjtimex"})
        CHECK(seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name) >= 0);
}

TEST_CASE("TIOCSTI and TIOCLINUX are denied on the low 32 bits; other ioctls pass") {
    const auto program = instructions(sandbox::generated_seccomp_program());
    for (const auto& arch : filtered_arches()) {
        INFO("arch " << arch.name);
        const int ioctl_nr = seccomp_syscall_resolve_name_arch(arch.token, "ioctl");
        REQUIRE(ioctl_nr >= 0);
        for (const std::uint64_t request :
             {std::uint64_t{TIOCSTI}, std::uint64_t{TIOCLINUX},
              std::uint64_t{TIOCSTI} | (std::uint64_t{1} << 32),
              std::uint64_t{TIOCLINUX} | (std::uint64_t{0xffff} << 48)}) {
            INFO("request " << std::hex << request);
            CHECK(run_filter(program, call(arch.audit, ioctl_nr, {0, request})) == k_eperm);
        }
        for (const std::uint64_t request :
             {std::uint64_t{TCGETS}, std::uint64_t{FIONREAD}, std::uint64_t{TIOCSTI} + 1})
            CHECK(run_filter(program, call(arch.audit, ioctl_nr, {0, request})) ==
                  SECCOMP_RET_ALLOW);
    }
}

TEST_CASE("unshare makes a user namespace alone and no other namespace; clone makes none") {
    const auto program = instructions(sandbox::generated_seccomp_program());
    for (const auto& arch : filtered_arches()) {
        INFO("arch " << arch.name);
        const int unshare_nr = seccomp_syscall_resolve_name_arch(arch.token, "unshare");
        const int clone_nr = seccomp_syscall_resolve_name_arch(arch.token, "clone");
        REQUIRE(unshare_nr >= 0);
        REQUIRE(clone_nr >= 0);
        // The sandbox's sudo: a user namespace, and nothing else with it.
        CHECK(run_filter(program, call(arch.audit, unshare_nr, {CLONE_NEWUSER})) ==
              SECCOMP_RET_ALLOW);
        CHECK(run_filter(program, call(arch.audit, unshare_nr, {CLONE_NEWUSER | CLONE_FS})) ==
              SECCOMP_RET_ALLOW);
        CHECK(run_filter(program, call(arch.audit, unshare_nr, {CLONE_FILES})) ==
              SECCOMP_RET_ALLOW);
        CHECK(run_filter(program, call(arch.audit, clone_nr, {CLONE_NEWUSER})) == k_eperm);
        CHECK(run_filter(program, call(arch.audit, clone_nr, {CLONE_NEWUSER | SIGCHLD})) ==
              k_eperm);
        CHECK(run_filter(program, call(arch.audit, clone_nr, {SIGCHLD})) == SECCOMP_RET_ALLOW);
        CHECK(run_filter(program,
                         call(arch.audit, clone_nr, {CLONE_VM | CLONE_THREAD | CLONE_SIGHAND})) ==
              SECCOMP_RET_ALLOW);
        for (const unsigned long flag : sandbox::seccomp_refused_namespaces()) {
            INFO("flag " << std::hex << flag);
            CHECK(run_filter(program, call(arch.audit, unshare_nr, {flag})) == k_eperm);
            CHECK(run_filter(program, call(arch.audit, unshare_nr, {flag | CLONE_NEWUSER})) ==
                  k_eperm);
            if (flag == CLONE_NEWTIME) continue;  // clone's exit-signal byte, not a clone flag
            CHECK(run_filter(program, call(arch.audit, clone_nr, {flag | SIGCHLD})) == k_eperm);
        }
        CHECK(sandbox::seccomp_refused_namespaces().size() == 7);
    }
}

TEST_CASE("a syscall from an architecture the filter does not know kills the process") {
    const auto program = instructions(sandbox::generated_seccomp_program());
    CHECK(run_filter(program, call(AUDIT_ARCH_AARCH64, 0)) == SECCOMP_RET_KILL_PROCESS);
}

TEST_CASE("the kernel enforces the linked program: ptrace and a nested namespace fail with EPERM") {
    const auto program = sandbox::generated_seccomp_program();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        sock_fprog prog{
            static_cast<unsigned short>(program.size() / sizeof(sock_filter)),
            const_cast<sock_filter*>(reinterpret_cast<const sock_filter*>(program.data()))};
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(10);
        if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ::_exit(11);
        if (::syscall(SYS_getpid) != ::getpid()) ::_exit(12);
        if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != -1 || errno != EPERM) ::_exit(13);
        if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != -1 || errno != EPERM) ::_exit(14);
        if (::unshare(CLONE_NEWNS) != -1 || errno != EPERM) ::_exit(16);
        if (::syscall(SYS_io_uring_setup, 1, nullptr) != -1 || errno != ENOSYS) ::_exit(15);
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
