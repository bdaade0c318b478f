# tools/test runs two tests at a time (ctest -j2). A test that times how soon a failure is
# noticed (a killed or stopped rank, a timeout) runs alone instead (RUN_SERIAL): another
# test's ranks on the same cores would stretch the time it measures.
#
# Suites where every case is such a test say RUN_SERIAL in gtest_discover_tests'
# PROPERTIES. Where only some cases are, strata_discover_tests(TARGET ALONE filter ...)
# takes gtest_discover_tests' arguments and a gtest filter ("Suite.*:Other.*"): the cases
# it matches run alone, the others as usual. A filter, not a list of names, so that a case
# added to or renamed in those suites stays alone.
function(strata_discover_tests target)
  cmake_parse_arguments(A "" "ALONE" "PROPERTIES" ${ARGN})
  gtest_discover_tests(${target} ${A_UNPARSED_ARGUMENTS} TEST_FILTER "-${A_ALONE}" PROPERTIES ${A_PROPERTIES})
  gtest_discover_tests(${target} ${A_UNPARSED_ARGUMENTS} TEST_FILTER "${A_ALONE}"
                       PROPERTIES ${A_PROPERTIES} RUN_SERIAL TRUE)
endfunction()
