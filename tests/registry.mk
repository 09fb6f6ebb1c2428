# SPDX-License-Identifier: MIT
# tests: registry (see tests/Makefile.inc)
#
# Fixture plugins: one good plugin and one per way a plugin can fail to
# load, including one per way the registry refuses a class (wrong size,
# newer minor or other major interface, NULL required slot, half of a slot
# pair). They are built for `make check` only, into tests/fixtures/.libs,
# which the tests put on the plugin path. Fixture backends share the op
# table in backend-ops.c; most fixtures, the plugin skeleton of
# fixture-plugin.h.
TDM_FIXTURE_LDFLAGS = -module -avoid-version -rpath /nowhere -no-undefined -shared
TDM_FIXTURE_LIBADD = core/libtandem-1.la $(GLIB_LIBS)
EXTRA_DIST += tests/fixtures/backend-ops.h tests/fixtures/fixture-dataset.h \
	tests/fixtures/fixture-plugin.h

check_LTLIBRARIES += \
	tests/fixtures/libtdm-fixture-good.la \
	tests/fixtures/libtdm-fixture-abi.la \
	tests/fixtures/libtdm-fixture-mismatch.la \
	tests/fixtures/libtdm-fixture-nosym.la \
	tests/fixtures/libtdm-fixture-initfail.la \
	tests/fixtures/libtdm-fixture-twin.la \
	tests/fixtures/libtdm-fixture-size.la \
	tests/fixtures/libtdm-fixture-newer.la \
	tests/fixtures/libtdm-fixture-major.la \
	tests/fixtures/libtdm-fixture-nullgemm.la \
	tests/fixtures/libtdm-fixture-pinned.la \
	tests/fixtures/libtdm-fixture-streams.la \
	tests/fixtures/libtdm-fixture-deferred.la \
	tests/fixtures/libtdm-fixture-oldstrategy.la

tests_fixtures_libtdm_fixture_good_la_SOURCES = tests/fixtures/good.c \
	tests/fixtures/backend-ops.c
tests_fixtures_libtdm_fixture_good_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_good_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_abi_la_SOURCES = tests/fixtures/abi.c
tests_fixtures_libtdm_fixture_abi_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_abi_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_mismatch_la_SOURCES = tests/fixtures/mismatch.c
tests_fixtures_libtdm_fixture_mismatch_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_mismatch_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_nosym_la_SOURCES = tests/fixtures/nosym.c
tests_fixtures_libtdm_fixture_nosym_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_nosym_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_initfail_la_SOURCES = tests/fixtures/initfail.c
tests_fixtures_libtdm_fixture_initfail_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_initfail_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_twin_la_SOURCES = tests/fixtures/twin.c
tests_fixtures_libtdm_fixture_twin_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_twin_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_size_la_SOURCES = tests/fixtures/size.c
tests_fixtures_libtdm_fixture_size_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_size_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_newer_la_SOURCES = tests/fixtures/newer.c
tests_fixtures_libtdm_fixture_newer_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_newer_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_major_la_SOURCES = tests/fixtures/major.c
tests_fixtures_libtdm_fixture_major_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_major_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_nullgemm_la_SOURCES = tests/fixtures/nullgemm.c \
	tests/fixtures/backend-ops.c
tests_fixtures_libtdm_fixture_nullgemm_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_nullgemm_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_pinned_la_SOURCES = tests/fixtures/pinned.c \
	tests/fixtures/backend-ops.c
tests_fixtures_libtdm_fixture_pinned_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_pinned_la_LIBADD = $(TDM_FIXTURE_LIBADD)

tests_fixtures_libtdm_fixture_streams_la_SOURCES = tests/fixtures/streams.c \
	tests/fixtures/backend-ops.c
tests_fixtures_libtdm_fixture_streams_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_streams_la_LIBADD = $(TDM_FIXTURE_LIBADD)

# A collective that defers its ops to wait, for tests/test-device.
tests_fixtures_libtdm_fixture_deferred_la_SOURCES = tests/fixtures/deferred.c
tests_fixtures_libtdm_fixture_deferred_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_deferred_la_LIBADD = $(TDM_FIXTURE_LIBADD)

# A strategy of the 1.0 contract (no read_stats), for tests/train-stats.sh.
tests_fixtures_libtdm_fixture_oldstrategy_la_SOURCES = tests/fixtures/oldstrategy.c
tests_fixtures_libtdm_fixture_oldstrategy_la_LDFLAGS = $(TDM_FIXTURE_LDFLAGS)
tests_fixtures_libtdm_fixture_oldstrategy_la_LIBADD = $(TDM_FIXTURE_LIBADD)

check_PROGRAMS += tests/test-registry
TESTS += tests/test-registry tests/inspect.sh
# `tandem check-plugin` on the built plugins and on tests/fixtures/broken-kit.c,
# which the test builds itself (it must not be on the fixtures' plugin path).
TESTS += tests/check-plugin.sh
EXTRA_DIST += tests/check-plugin.sh tests/fixtures/broken-kit.c
# The strategy's end of training comes before the final evaluation
# (tests/fixtures/end-swap.c, built by the test like broken-kit.c).
TESTS += tests/end-order.sh
EXTRA_DIST += tests/end-order.sh tests/fixtures/end-swap.c
EXTRA_DIST += tests/inspect.sh
