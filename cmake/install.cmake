# `cmake --install build --prefix P`: libstrata (and libstrata-cuda where built),
# libnccl.so.2, the public headers, the tools, a CMake package (find_package(strata) ->
# strata::strata) and strata.pc. The tools find libstrata relative to themselves, so an
# installed tree can be moved.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(strata PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
file(RELATIVE_PATH _strata_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set(STRATA_TOOLS strata-run strata-topo strata-perf strata-sim strata-train mpi-perf gloo-perf)
foreach(tool ${STRATA_TOOLS})
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES INSTALL_RPATH "$ORIGIN/${_strata_bin_to_lib}" INSTALL_RPATH_USE_LINK_PATH TRUE)
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# libnccl.so.2 in a directory of its own (putting it on LD_LIBRARY_PATH shadows nothing
# else), finding libstrata one level up; its header under include/nccl. strata-perf's
# --api nccl finds it there unless LD_LIBRARY_PATH says otherwise.
set_target_properties(strata_nccl PROPERTIES INSTALL_RPATH "$ORIGIN/..")
install(TARGETS strata_nccl LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/strata-nccl)
install(DIRECTORY include/nccl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set_property(TARGET strata-perf APPEND PROPERTY INSTALL_RPATH "$ORIGIN/${_strata_bin_to_lib}/strata-nccl")

install(TARGETS strata EXPORT strataTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The CUDA backend goes beside libstrata, where libstrata looks for it (dladdr).
if(TARGET strata-cuda)
  set_target_properties(strata-cuda PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS strata-cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# strata-train's CUDA kernels likewise (training/device/choose.cpp looks beside libstrata).
if(TARGET strata-train-cuda)
  set_target_properties(strata-train-cuda PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS strata-train-cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(FILES include/strata.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/strata DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")

set(_strata_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
install(EXPORT strataTargets NAMESPACE strata:: DESTINATION ${_strata_cmake_dir})
configure_package_config_file(cmake/strataConfig.cmake.in ${CMAKE_BINARY_DIR}/strataConfig.cmake
                              INSTALL_DESTINATION ${_strata_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/strataConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/strataConfig.cmake ${CMAKE_BINARY_DIR}/strataConfigVersion.cmake
        DESTINATION ${_strata_cmake_dir})

# strata.pc names the prefix given at install time (cmake --install --prefix), not the
# configure-time one: it is written by an install script.
install(CODE "
  set(CMAKE_INSTALL_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/strata.pc.in\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/strata.pc\" @ONLY)
  message(STATUS \"Installing: \${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/strata.pc\")
")

# strata-sim's example clusters (docs/simulator.md).
if(TARGET strata-sim)
  install(DIRECTORY perf/sim/clusters/ DESTINATION ${CMAKE_INSTALL_DATADIR}/strata/clusters FILES_MATCHING PATTERN "*.cluster")
endif()
