# Installs the package dcp into a fresh virtual environment, as a user would, for the Python
# tests (CTest python.install, the fixture of every test labelled python):
#
#   cmake -DPYTHON=<interpreter> -DVENV=<folder> -DSOURCE=<checkout> -DBUILD=<CMake build tree>
#         -P install_test_venv.cmake
#
# `python -m venv --system-site-packages` (the system's torch stays importable; dcp is not
# installed there), then `pip install --no-build-isolation --no-index <checkout>` with
# DCP_CMAKE_BUILD_DIR=<build tree>, so the wheel takes the extension this build already made.
foreach(variable PYTHON VENV SOURCE BUILD)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "install_test_venv.cmake: -D${variable}=... is required")
  endif()
endforeach()

execute_process(COMMAND "${PYTHON}" -m venv --clear --system-site-packages "${VENV}"
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "python -m venv ${VENV} failed (${status}); Debian needs python3-venv")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "DCP_CMAKE_BUILD_DIR=${BUILD}" PIP_DISABLE_PIP_VERSION_CHECK=1
          "${VENV}/bin/python" -m pip install --no-build-isolation --no-index --no-deps --quiet "${SOURCE}"
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "pip install ${SOURCE} into ${VENV} failed (${status})")
endif()
execute_process(COMMAND "${VENV}/bin/python" -c "import dcp, dcp.torch; print('installed dcp', dcp.__version__, 'at', dcp.__file__)"
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the installed package does not import (${status})")
endif()
