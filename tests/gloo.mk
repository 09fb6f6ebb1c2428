# SPDX-License-Identifier: MIT
# tests: gloo (see tests/Makefile.inc). tests/test-collectives runs every op
# and the timeouts for every collective plugin built, gloo included; this
# adds the failures gloo names by itself, without the debug check.
if TDM_BUILD_GLOO
TESTS += plugins/gloo/gloo-failures.sh
endif
EXTRA_DIST += plugins/gloo/gloo-failures.sh
