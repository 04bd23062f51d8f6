#pragma once
// The names of the base library (common/) that the sandbox library's own code uses without
// qualification: its error values and its fd owner. Everything else of common/ is named
// `common::` here as in the other folders.

#include "common/error.hpp"
#include "common/fd.hpp"

namespace sandbox {

using common::close_all;
using common::errno_message;
using common::Error;
using common::ErrorKind;
using common::Expected;
using common::fail;
using common::Fd;
using common::to_string;

}  // namespace sandbox
