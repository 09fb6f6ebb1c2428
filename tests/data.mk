# tests: data (see tests/Makefile.inc)
