#pragma once
// dcp's version, and the inline namespace that carries it into every mangled name.
//
// Everything dcp declares lives in `dcp::DCP_ABI_NAMESPACE` (today `dcp::v0_1`), an inline
// namespace, so code says `dcp::step_plan` while the linker sees `dcp::v0_1::step_plan`. Two
// libraries in one process built against different dcp versions therefore get different
// symbols instead of silently sharing one (an ODR violation nothing would report). The ABI tag
// changes with every minor version while the major version is 0, and with the major after 1.0.
// CMakeLists.txt reads the project version from the three numbers below.

#define DCP_VERSION_MAJOR 0
#define DCP_VERSION_MINOR 1
#define DCP_VERSION_PATCH 0

/// One number for comparisons: major * 10000 + minor * 100 + patch.
#define DCP_VERSION (DCP_VERSION_MAJOR * 10000 + DCP_VERSION_MINOR * 100 + DCP_VERSION_PATCH)
#define DCP_VERSION_STRING "0.1.0"

/// The inline namespace of this version.
#define DCP_ABI_NAMESPACE v0_1
