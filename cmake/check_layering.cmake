# Run at every build (cmake -P; the `layering` target of CMakeLists.txt): fails the build when
# a source includes a folder its library may not depend on (ARCHITECTURE.md, The parts):
#   common  -> nothing else
#   github  -> common
#   sandbox -> common
#   jobs    -> sandbox, common
#   agent   -> everything
# One line per offending include, FILE:LINE and what it includes; one per file where a
# SANDGATE_TRY stands as a statement. Input: SOURCE_DIR.
set(allowed_common "common")
set(allowed_github "common|github")
set(allowed_sandbox "common|sandbox")
set(allowed_jobs "common|sandbox|jobs")
set(project_folders "common|sandbox|jobs|github|agent")
set(offences "")
foreach(folder common github sandbox jobs)
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${folder}/*.cpp" "${SOURCE_DIR}/${folder}/*.hpp")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" lines)
    set(number 0)
    foreach(line IN LISTS lines)
      math(EXPR number "${number} + 1")
      if(line MATCHES "^#include \"(${project_folders})/([^\"]+)\"")
        set(target "${CMAKE_MATCH_1}")
        set(header "${CMAKE_MATCH_2}")
        if(NOT target MATCHES "^(${allowed_${folder}})$")
          file(RELATIVE_PATH relative "${SOURCE_DIR}" "${source}")
          string(APPEND offences "${relative}:${number}: ${folder}/ may not include "
                 "${target}/${header}\n")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
# A SANDGATE_TRY standing as a statement drops its value, which may be a guard that must live
# to the end of the scope (common/error.hpp): statements use SANDGATE_CHECK (Expected<void>
# only) or say `(void)SANDGATE_TRY(...)`. A TRY on a line after one ending in `;`, `{`, `}` or
# a comment, or after `if (...)`/`else`, stands as a statement.
foreach(folder common github sandbox jobs agent apps tests fuzz bench)
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${folder}/*.cpp" "${SOURCE_DIR}/${folder}/*.hpp")
  foreach(source IN LISTS sources)
    file(READ "${source}" text)
    if(text MATCHES "([;{}]|//[^\n]*)\n[ ]*SANDGATE_TRY\\(" OR
       text MATCHES "(\\)|else) SANDGATE_TRY\\(")
      file(RELATIVE_PATH relative "${SOURCE_DIR}" "${source}")
      string(APPEND offences "${relative}: a SANDGATE_TRY stands as a statement (its value "
             "dropped): SANDGATE_CHECK, or name the value\n")
    endif()
  endforeach()
endforeach()
if(offences)
  message(FATAL_ERROR "layering (ARCHITECTURE.md, The parts):\n${offences}")
endif()
