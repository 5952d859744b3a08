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
