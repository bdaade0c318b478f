# tools/test runs two tests at a time (ctest -j2). A test that times how soon a failure is
# noticed (a killed or stopped rank, a timeout) runs alone instead (RUN_SERIAL): another
# test's ranks on the same cores would stretch the time it measures.
#
# Suites where every case is such a test say RUN_SERIAL in gtest_discover_tests'
# PROPERTIES. For some cases of a suite, call this after gtest_discover_tests: the cases
# exist only when ctest reads the file gtest_discover_tests made at build time, so their
# properties are set from a file ctest reads after it.
function(strata_run_alone)
  set(_file ${CMAKE_CURRENT_BINARY_DIR}/run_alone.cmake)
  list(JOIN ARGN " " _names)
  file(WRITE ${_file} "set_tests_properties(${_names} PROPERTIES RUN_SERIAL TRUE)\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_file})
endfunction()
