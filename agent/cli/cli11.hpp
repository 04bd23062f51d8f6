#pragma once
// CLI11, included once for the whole code base: its inlined string splitting trips g++ 12's
// -Wnull-dereference (a false positive inside the library's header, not in sandgate's code),
// so the warning is silenced for the header's own lines only.

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>
#pragma GCC diagnostic pop
