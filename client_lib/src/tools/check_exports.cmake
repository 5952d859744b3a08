# cmake -DLIB=<libgpuctl.so> -DHEADER=<gpuctl.h> [-DEXTRA=a;b] -P check_exports.cmake
# Fails unless the defined dynamic symbols of LIB are exactly the functions
# declared GPUCTL_EXPORT in HEADER plus the EXTRA entry points (symbols
# other tools look up by name: InitializeInjection for CUDA_INJECTION64_PATH;
# libc's credential calls, which the library interposes).
find_program(NM NAMES nm REQUIRED)
file(READ "${HEADER}" header)
string(REGEX MATCHALL "GPUCTL_EXPORT[^;(]*[ *](gpuctl_[a-z0-9_]+)[ ]*\\(" decls "${header}")
set(expected "")
foreach(decl IN LISTS decls)
  string(REGEX REPLACE ".*[ *](gpuctl_[a-z0-9_]+)[ ]*\\($" "\\1" name "${decl}")
  list(APPEND expected "${name}")
endforeach()
list(APPEND expected ${EXTRA})
list(LENGTH expected n_expected)
if(n_expected EQUAL 0)
  message(FATAL_ERROR "no GPUCTL_EXPORT declarations found in ${HEADER}")
endif()

execute_process(COMMAND ${NM} -D --defined-only "${LIB}"
  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D failed on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(actual "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]+ ([A-Za-z]) ([^@ ]+)")
    set(type "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    # A version node itself (GPUCTL_0, libc's for the credential calls) is
    # an absolute symbol.
    if(type STREQUAL "A" AND name MATCHES "^(GPUCTL|GLIBC)_")
      continue()
    endif()
    list(APPEND actual "${name}")
  endif()
endforeach()
list(SORT expected)
list(SORT actual)
if(NOT expected STREQUAL actual)
  message(FATAL_ERROR "exported symbols differ from the API\n expected: ${expected}\n actual:   ${actual}")
endif()
message(STATUS "exports OK: ${actual}")
