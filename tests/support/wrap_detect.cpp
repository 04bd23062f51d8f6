#include "tests/support/wrap_detect.hpp"

#include <cstdlib>
#include <fstream>
#include <string>

namespace tests {

bool under_wrap() {
    static const bool value = [] {
        if (const char* marker = std::getenv("SANDGATE_UNDER_WRAP"); marker && *marker == '1')
            return true;
        // bwrap stays as pid 1 of the sandbox's pid namespace (it reaps and forwards).
        std::ifstream comm("/proc/1/comm");
        std::string name;
        std::getline(comm, name);
        return name == "bwrap";
    }();
    return value;
}

}  // namespace tests
