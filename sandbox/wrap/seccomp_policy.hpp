#pragma once
// The rules of the wrap's syscall filter (see seccomp.hpp for what they deny and why) and their
// compilation to BPF with libseccomp. The build runs the compilation once, in
// sandbox/gen/seccomp_gen.cpp, and links the bytes into sandbox (seccomp_program.cpp in the
// build dir), so no process pays for libseccomp's compiler per start; tests compare that
// program with a fresh compilation and check each rule on it.

#include <span>
#include <string>
#include <string_view>

#include "sandbox/base.hpp"

namespace sandbox {

// Syscall names the filter answers with EPERM, and with ENOSYS (callers fall back). A name
// that is not a syscall on an architecture is skipped there.
std::span<const char* const> seccomp_eperm_syscalls();
std::span<const char* const> seccomp_enosys_syscalls();

// The namespace flags unshare() and clone() are refused (EPERM) with, each alone or with any
// other flags: every namespace but the user namespace. unshare(CLONE_NEWUSER) alone is the one
// namespace a step may make (the sandbox's sudo); clone() with CLONE_NEWUSER is refused as well.
std::span<const unsigned long> seccomp_refused_namespaces();

// Compiles the rules with libseccomp (native architecture, plus x86 and x32 on x86_64) and
// returns the BPF program (an array of struct sock_filter), or unavailable.
Expected<std::string> compile_seccomp_program();

// The program compiled at build time by the generator (defined in the generated source).
std::string_view generated_seccomp_program();

}  // namespace sandbox
