// sandgate-test-child: the helper program the process tests run. One mode per invocation:
//   exit N              exit with status N
// (the process-core work adds spew, ignore-term, double-fork, hold-pipe, stop-self, ...)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

int main(int argc, char** argv) {
    if (argc >= 3 && std::string_view(argv[1]) == "exit") return std::atoi(argv[2]);
    std::fprintf(stderr, "sandgate-test-child: unknown mode\n");
    return 99;
}
