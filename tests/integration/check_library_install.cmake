# Installs only the `dcp` install component into PREFIX and checks that the headers it holds are
# exactly the library's: every file under <source>/include/dcp/ except the adapters' folders,
# and nothing of the lab (sim/include/). Run by CTest as integration.finding_03_install_library_only.
file(REMOVE_RECURSE "${PREFIX}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" --config "${CONFIG}"
          --component dcp
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install --component dcp failed (${status})")
endif()

file(GLOB_RECURSE installed RELATIVE "${PREFIX}/include" "${PREFIX}/include/*")
file(GLOB_RECURSE expected RELATIVE "${SOURCE_DIR}/include" "${SOURCE_DIR}/include/dcp/*.hpp")
list(FILTER expected EXCLUDE REGEX "^dcp/(mpi|nccl|cuda|torch)/")
list(SORT installed)
list(SORT expected)
if(NOT installed STREQUAL expected)
  set(extra ${installed})
  list(REMOVE_ITEM extra ${expected})
  set(missing ${expected})
  list(REMOVE_ITEM missing ${installed})
  message(FATAL_ERROR "the library component's headers differ from include/dcp/:\n"
                      "  installed but not the library's: ${extra}\n"
                      "  the library's but not installed: ${missing}")
endif()
list(LENGTH installed count)
message(STATUS "library component: ${count} headers, all from include/dcp/, none from sim/")
foreach(file IN ITEMS share/dcp/cmake/dcpConfig.cmake share/dcp/cmake/dcp-dcp-targets.cmake)
  if(NOT EXISTS "${PREFIX}/${file}")
    message(FATAL_ERROR "the library component lacks ${file}")
  endif()
endforeach()
if(EXISTS "${PREFIX}/share/dcp/cmake/dcp-sim-targets.cmake")
  message(FATAL_ERROR "the library component installs the lab's export (dcp-sim-targets.cmake)")
endif()
