# SPDX-License-Identifier: MIT
# tests: the parameter grammar (<tandem/params.h>) - types, ranges,
# positional values, unknown keys and both TdmParamSpec layouts. Each kind's
# use through the command line is in bad-input.sh, datasets-cli.sh and
# strategies-faults.sh; ddp's bucket size in test-ddp.
check_PROGRAMS += tests/test-params
TESTS += tests/test-params

# A fixture plugin whose spec contradicts itself: refused as a whole, with
# the reason (tests/inspect.sh).
check_LTLIBRARIES += tests/fixtures/libtdm-fixture-badspec.la
tests_fixtures_libtdm_fixture_badspec_la_SOURCES = tests/fixtures/badspec.c
tests_fixtures_libtdm_fixture_badspec_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_badspec_la_LIBADD = $(TDM_FIXTURE_LIBADD)
# The grammar's fuzz target is built by hand with clang (see the file).
EXTRA_DIST += tests/fuzz/fuzz-params.c
