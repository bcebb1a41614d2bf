# Checks that `cmake --install` installs the Python package (CTest python.cmake_install):
#
#   cmake -DPYTHON=<interpreter> -DBUILD=<CMake build tree> -DPREFIX=<empty folder>
#         -DPYTHONDIR=<DCP_INSTALL_PYTHONDIR> -P check_cmake_install.cmake
#
# installs the component `python` under PREFIX and imports dcp (and dcp.torch where torch is
# installed) from PREFIX/PYTHONDIR, from outside the source and build trees.
foreach(variable PYTHON BUILD PREFIX PYTHONDIR)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "check_cmake_install.cmake: -D${variable}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --component python --prefix "${PREFIX}"
  RESULT_VARIABLE status OUTPUT_QUIET)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD} --component python failed (${status})")
endif()
set(check [=[
import importlib.util, os, sys
import dcp
where = os.path.realpath(dcp.__file__)
assert where.startswith(os.path.realpath(sys.argv[1])), where
if importlib.util.find_spec("torch") is not None:
    import dcp.torch
print("imported", where)
]=])
execute_process(COMMAND "${CMAKE_COMMAND}" -E env "PYTHONPATH=${PREFIX}/${PYTHONDIR}" PYTHONDONTWRITEBYTECODE=1
                        "${PYTHON}" -c "${check}" "${PREFIX}"
  WORKING_DIRECTORY "${PREFIX}" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the package installed under ${PREFIX}/${PYTHONDIR} does not import (${status})")
endif()
