# tests: core (see tests/Makefile.inc)
