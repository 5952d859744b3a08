# gpuctl_test(NAME SOURCES... [LIBS libs...] [REAL_PROCESSES]): a GoogleTest
# binary run by CTest. REAL_PROCESSES: it drives the shipped library in real
# processes, so it is built and run with GPUCTL_BUILD_UNIT_TESTS=OFF too.
function(gpuctl_test name)
  cmake_parse_arguments(ARG "REAL_PROCESSES" "" "SOURCES;LIBS" ${ARGN})
  if(NOT GPUCTL_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  if(NOT GPUCTL_BUILD_UNIT_TESTS AND NOT ARG_REAL_PROCESSES)
    # Declared, so that settings made on it elsewhere still apply, but
    # neither built by default nor registered with CTest.
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
    return()
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
endfunction()

# gpuctl_sanitizer_runtime(KIND OUT): the shared sanitizer runtime (KIND
# asan or tsan) to put before a sanitized libgpuctl.so in LD_PRELOAD, since
# the programs it is preloaded into are not sanitized. GCC's is libasan.so;
# Clang's is libclang_rt.asan-<arch>.so (UBSan included), which Clang does
# not link into shared libraries at all.
function(gpuctl_sanitizer_runtime kind out)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(name "libclang_rt.${kind}-${CMAKE_SYSTEM_PROCESSOR}.so")
  else()
    set(name "lib${kind}.so")
  endif()
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${name}
    OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE)
  # -print-file-name echoes the bare name when it finds nothing.
  if(NOT IS_ABSOLUTE "${path}" OR NOT EXISTS "${path}")
    message(FATAL_ERROR "gpuctl: ${CMAKE_CXX_COMPILER} has no ${name} "
      "(for Clang: apt-get install libclang-rt-dev)")
  endif()
  set(${out} "${path}" PARENT_SCOPE)
endfunction()
