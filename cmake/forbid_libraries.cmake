# Run after a binary is linked (cmake -P): fails the build when FILE's dynamic section needs
# one of the libraries named in FORBIDDEN (name prefixes, comma-separated), so that a stray include
# that drags libcurl, libgit2 or OpenSSL into the agent daemon is a build error, not a slower
# daemon found later. Inputs: READELF, FILE, FORBIDDEN.
execute_process(COMMAND "${READELF}" -d "${FILE}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FILE}: readelf -d failed (${rc})")
endif()
string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dynamic}")
string(REPLACE "," ";" forbidden "${FORBIDDEN}")
foreach(entry IN LISTS needed)
  string(REGEX REPLACE "Shared library: \\[([^]]+)\\]" "\\1" library "${entry}")
  foreach(prefix IN LISTS forbidden)
    if(library MATCHES "^${prefix}")
      message(FATAL_ERROR "${FILE} links ${library}, which it must not: find the include that "
                          "pulled its user in (see ARCHITECTURE.md, Binaries)")
    endif()
  endforeach()
endforeach()
