# Sanitizer and fuzzing builds (docs/reliability-tools.md; tools/sanitize drives them).
#
#   STRATA_SANITIZE=address,undefined   every target, tests and tools included, built with
#                                       AddressSanitizer and UndefinedBehaviorSanitizer
#   STRATA_SANITIZE=thread              ThreadSanitizer
#   STRATA_FUZZ=ON                      (clang) coverage for libFuzzer on every target, and
#                                       the harnesses of tests/fuzz linked with libFuzzer
#
# Each goes in its own build directory (build-asan, build-tsan, build-fuzz): objects built
# with a sanitizer cannot be linked with plain ones.
set(STRATA_SANITIZE "" CACHE STRING "sanitizers to build with: address,undefined or thread (empty: none)")
option(STRATA_FUZZ "build the libFuzzer harnesses of tests/fuzz (needs clang)" OFF)

if(STRATA_SANITIZE)
  string(REPLACE "," ";" _strata_sanitizers "${STRATA_SANITIZE}")
  foreach(s IN LISTS _strata_sanitizers)
    if(NOT s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "STRATA_SANITIZE: '${s}' is not one of address, undefined, thread")
    endif()
  endforeach()
  if("thread" IN_LIST _strata_sanitizers AND "address" IN_LIST _strata_sanitizers)
    message(FATAL_ERROR "STRATA_SANITIZE: thread and address cannot be combined (use two build directories)")
  endif()
  # Frame pointers give whole stacks in reports; UB stops the program (so a test fails)
  # instead of printing a line nobody reads.
  add_compile_options(-fsanitize=${STRATA_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${STRATA_SANITIZE})
  if("undefined" IN_LIST _strata_sanitizers)
    add_compile_options(-fno-sanitize-recover=all)
  endif()
  # GCC's flow analysis sees the sanitizers' checks and warns of uninitialized values that
  # are not (e.g. all over <regex>); the plain build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  message(STATUS "strata: built with -fsanitize=${STRATA_SANITIZE}")
endif()

if(STRATA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "STRATA_FUZZ needs clang (libFuzzer): cmake -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # Coverage everywhere; only the harnesses link libFuzzer's main (tests/fuzz).
  add_compile_options(-fsanitize=fuzzer-no-link)
  message(STATUS "strata: libFuzzer harnesses (tests/fuzz)")
endif()
