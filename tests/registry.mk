# tests: registry (see tests/Makefile.inc)
