#include "sandbox/seccomp.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/seccomp_policy.hpp"

namespace sandbox {

Expected<Fd> seccomp_filter_fd() {
    // The program is the same for every run and every process: compiled at build time.
    const std::string_view program = generated_seccomp_program();
    if (program.empty()) return fail(ErrorKind::unavailable, "the build carries no seccomp program");
    Fd fd(::memfd_create("sandgate-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) return fail(ErrorKind::unavailable, errno_message("memfd_create"));
    if (::write(fd.get(), program.data(), program.size()) !=
        static_cast<ssize_t>(program.size()))
        return fail(ErrorKind::unavailable, errno_message("writing the seccomp program"));
    ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    ::lseek(fd.get(), 0, SEEK_SET);
    return fd;
}

}  // namespace sandbox
