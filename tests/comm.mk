# tests: comm (see tests/Makefile.inc)
