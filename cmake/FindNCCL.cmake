#[=======================================================================[.rst:
FindNCCL
--------

Finds NCCL, the NVIDIA Collective Communications Library: the header ``nccl.h`` and the shared
library (``libnccl.so``, or only ``libnccl.so.2`` as the ``nvidia-nccl-cu*`` Python wheels ship
it). dcp uses it for the ``dcp::nccl`` target; it is installed next to ``dcpConfig.cmake`` so that
the package can find NCCL again in a consumer's build.

Imported target
^^^^^^^^^^^^^^^

``NCCL::NCCL``
  The library, its include directory, and ``CUDA::cudart`` as a usage requirement. When no
  ``CUDA::cudart`` target exists yet, this module calls ``find_package(CUDAToolkit)`` for it;
  without the CUDA runtime NCCL is reported as not found.

Result variables
^^^^^^^^^^^^^^^^

``NCCL_FOUND``
  True when the header, the library and the CUDA runtime were found (and the version matched).
``NCCL_INCLUDE_DIRS``, ``NCCL_LIBRARIES``
  What to compile and link against, for code that does not use the imported target.
``NCCL_VERSION``, ``NCCL_VERSION_MAJOR``, ``NCCL_VERSION_MINOR``, ``NCCL_VERSION_PATCH``
  Read from ``NCCL_MAJOR``, ``NCCL_MINOR`` and ``NCCL_PATCH`` in ``nccl.h`` (the header's
  version, which is the library's when both come from one installation). A version given to
  ``find_package(NCCL 2.18)`` is checked against it.

Cache variables
^^^^^^^^^^^^^^^

``NCCL_INCLUDE_DIR``, ``NCCL_LIBRARY``
  The folder holding ``nccl.h`` and the library file; set them to skip the search.

Hints
^^^^^

Searched in this order, then the system's default places (``/usr/include``,
``/usr/lib/x86_64-linux-gnu``, ... where Debian's ``libnccl-dev`` puts it):

``NCCL_ROOT`` (CMake variable or environment variable)
  The prefix of an NCCL installation (``include/``, ``lib/`` or ``lib64/`` below it), e.g. an
  unpacked NCCL tarball or a wheel's ``site-packages/nvidia/nccl``.
``CUDAToolkit_ROOT`` (CMake variable or environment variable), ``CUDA_PATH`` (environment)
  The CUDA toolkit's prefix; NCCL bundled with the toolkit sits in its ``include/`` and
  ``lib64/`` (or ``lib/``, ``targets/<arch>/``).
The toolkit that ``find_package(CUDAToolkit)`` found
  ``CUDAToolkit_INCLUDE_DIRS``, ``CUDAToolkit_LIBRARY_DIR`` and ``CUDAToolkit_TARGET_DIR``.
#]=======================================================================]

include(FindPackageHandleStandardArgs)

# NCCL needs the CUDA runtime; find it the way the caller would have, unless they already did.
if(NOT TARGET CUDA::cudart)
  set(_nccl_cuda_quiet)
  if(NCCL_FIND_QUIETLY)
    set(_nccl_cuda_quiet QUIET)
  endif()
  find_package(CUDAToolkit ${_nccl_cuda_quiet})
  unset(_nccl_cuda_quiet)
endif()

set(_nccl_hints)
foreach(_nccl_prefix IN ITEMS "${NCCL_ROOT}" "$ENV{NCCL_ROOT}" "${CUDAToolkit_ROOT}" "$ENV{CUDAToolkit_ROOT}"
                              "$ENV{CUDA_PATH}" "${CUDAToolkit_TARGET_DIR}")
  if(_nccl_prefix)
    list(APPEND _nccl_hints "${_nccl_prefix}")
  endif()
endforeach()
unset(_nccl_prefix)

find_path(NCCL_INCLUDE_DIR
  NAMES nccl.h
  HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)

# NAMES_PER_DIR: in each folder prefer the development link (libnccl.so) to the versioned file.
find_library(NCCL_LIBRARY
  NAMES nccl libnccl.so.2
  NAMES_PER_DIR
  HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu lib/aarch64-linux-gnu)
unset(_nccl_hints)

unset(NCCL_VERSION)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
    REGEX "^#define[ \t]+NCCL_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
  foreach(_nccl_part IN ITEMS MAJOR MINOR PATCH)
    set(NCCL_VERSION_${_nccl_part} "")
    foreach(_nccl_line IN LISTS _nccl_version_lines)
      if(_nccl_line MATCHES "^#define[ \t]+NCCL_${_nccl_part}[ \t]+([0-9]+)")
        set(NCCL_VERSION_${_nccl_part} "${CMAKE_MATCH_1}")
      endif()
    endforeach()
  endforeach()
  if(NOT NCCL_VERSION_MAJOR STREQUAL "" AND NOT NCCL_VERSION_MINOR STREQUAL ""
     AND NOT NCCL_VERSION_PATCH STREQUAL "")
    set(NCCL_VERSION "${NCCL_VERSION_MAJOR}.${NCCL_VERSION_MINOR}.${NCCL_VERSION_PATCH}")
  endif()
  unset(_nccl_version_lines)
  unset(_nccl_part)
  unset(_nccl_line)
endif()

# A required variable that is set only when the CUDA runtime target exists, so that its absence
# fails the search with a message naming it.
set(NCCL_CUDA_RUNTIME "NCCL_CUDA_RUNTIME-NOTFOUND")
if(TARGET CUDA::cudart)
  set(NCCL_CUDA_RUNTIME CUDA::cudart)
endif()

# NAME_MISMATCHED: dcpConfig.cmake includes this file inside find_package(dcp).
find_package_handle_standard_args(NCCL
  NAME_MISMATCHED
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR NCCL_CUDA_RUNTIME
  VERSION_VAR NCCL_VERSION
  REASON_FAILURE_MESSAGE
    "Set NCCL_ROOT to NCCL's prefix, or CUDAToolkit_ROOT to a CUDA toolkit that bundles it. NCCL also needs the CUDA runtime (CUDA::cudart from find_package(CUDAToolkit)).")

if(NCCL_FOUND)
  set(NCCL_INCLUDE_DIRS "${NCCL_INCLUDE_DIR}")
  set(NCCL_LIBRARIES "${NCCL_LIBRARY}")
  if(NOT TARGET NCCL::NCCL)
    add_library(NCCL::NCCL UNKNOWN IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES CUDA::cudart)
  endif()
endif()

mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
unset(NCCL_CUDA_RUNTIME)
