#pragma once
// The .env format of --env-file and --secret-file (as act reads them with godotenv):
// `NAME=value` lines, `export NAME=value`, `#` comments and blank lines; values unquoted
// (trimmed, ` #...` comment cut), 'single quoted' (literal) or "double quoted" (\n, \r, \t,
// \", \\ and \$ escapes; may span lines). Errors name the file and line.

#include <string_view>

#include "common/error.hpp"
#include "sandbox/process/run.hpp"

namespace jobs {

common::Expected<sandbox::Environment> parse_dotenv(std::string_view text, std::string_view file);
common::Expected<sandbox::Environment> load_dotenv(const std::string& path);

}  // namespace jobs
